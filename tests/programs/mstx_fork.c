/*
 * Marks "parent-before", forks; the child marks "child-0".."child-2" and
 * exits 0; the parent waits, marks "parent-after" and prints the child's
 * pid as "child=<pid>". Exit status 0 only if the child exited 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mstx_api.h"

int main(void)
{
    mstxMarkA("parent-before", NULL);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("mstx_fork: fork");
        return 1;
    }
    if (pid == 0) {
        char msg[32];
        for (int i = 0; i < 3; i++) {
            snprintf(msg, sizeof msg, "child-%d", i);
            mstxMarkA(msg, NULL);
        }
        exit(0);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) {
        perror("mstx_fork: waitpid");
        return 1;
    }
    mstxMarkA("parent-after", NULL);
    printf("child=%d\n", (int)pid);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
