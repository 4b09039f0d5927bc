/*
 * A torchrun-like launcher (issue 18): starts N ranks of a program, each with RANK,
 * LOCAL_RANK, WORLD_SIZE and MASTER_ADDR/MASTER_PORT set (and ASCEND_RT_VISIBLE_DEVICES=<rank>
 * with -v), then waits for them. It installs no signal handler: SIGINT/SIGTERM sent to it
 * alone end it at once and leave its ranks running, as a launcher killed by a scheduler does.
 *
 * usage: rank_launcher [-v] N PROGRAM [ARGS...]
 * Exits 0 when every rank exited 0, else 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int a = 1, visible = 0;
    if (a < argc && strcmp(argv[a], "-v") == 0) {
        visible = 1;
        a++;
    }
    if (argc - a < 2) {
        fprintf(stderr, "usage: rank_launcher [-v] N PROGRAM [ARGS...]\n");
        return 2;
    }
    int n = atoi(argv[a]);
    char num[16];
    snprintf(num, sizeof num, "%d", n);
    setenv("WORLD_SIZE", num, 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", "29500", 1);
    for (int r = 0; r < n; r++) {
        pid_t pid = fork();
        if (pid < 0)
            return 1;
        if (pid == 0) {
            snprintf(num, sizeof num, "%d", r);
            setenv("RANK", num, 1);
            setenv("LOCAL_RANK", num, 1);
            if (visible)
                setenv("ASCEND_RT_VISIBLE_DEVICES", num, 1);
            execv(argv[a + 1], &argv[a + 1]);
            perror("rank_launcher: exec");
            _exit(127);
        }
    }
    int ok = 1, st = 0;
    while (wait(&st) > 0)
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            ok = 0;
    return ok ? 0 : 1;
}
