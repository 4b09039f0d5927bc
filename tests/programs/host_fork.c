/* HOST adapter test: fork without exec (child allocates 2222) and fork + exec (the exec'd
 * image of the child allocates 3333); the parent allocates 1111. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void *volatile sink;

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "exec-child") == 0) {
        sink = malloc(3333);
        return 0;
    }
    sink = malloc(1111);
    pid_t a = fork();
    if (a == 0) {
        sink = malloc(2222);
        _exit(0);
    }
    pid_t b = fork();
    if (b == 0) {
        sink = malloc(4444);
        execl("/proc/self/exe", argv[0], "exec-child", (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(a, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return 1;
    waitpid(b, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return 2;
    return 0;
}
