/* Stands in for the collector's side of the liveness contract: creates argv[1] (mode 0600),
 * holds flock(LOCK_EX) on it, prints "locked", and waits until stdin closes or it is killed. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    int fd = open(argv[1], O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || flock(fd, LOCK_EX) != 0) {
        perror(argv[1]);
        return 1;
    }
    printf("locked\n");
    fflush(stdout);
    char b[64];
    while (read(0, b, sizeof b) > 0) {
    }
    return 0;
}
