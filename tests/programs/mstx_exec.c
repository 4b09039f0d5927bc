/*
 * Marks "before-exec", forks; the child execs argv[1] with argv[2..]
 * (PATH is searched); the parent waits and marks "after-exec". Exits with
 * the child's exit status (127 if the exec failed, 128+sig if killed).
 */
#include <stdio.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mstx_api.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: mstx_exec PROGRAM [ARGS...]\n");
        return 2;
    }
    mstxMarkA("before-exec", NULL);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("mstx_exec: fork");
        return 1;
    }
    if (pid == 0) {
        execvp(argv[1], &argv[1]);
        perror("mstx_exec: exec");
        _exit(127);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) {
        perror("mstx_exec: waitpid");
        return 1;
    }
    mstxMarkA("after-exec", NULL);
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}
