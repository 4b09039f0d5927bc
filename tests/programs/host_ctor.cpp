// HOST adapter test: allocations in a C++ static constructor (before main, possibly before the
// probe initialised), std containers, and exceptions thrown and caught.
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

struct Global {
    char *buf;
    std::vector<int> v;
    __attribute__((noinline)) Global() : buf(new char[5555]), v(1000, 7) {}
};

Global global_object;

__attribute__((noinline)) static int thrower(int i) {
    if (i % 2) throw std::runtime_error(std::string(100, 'x'));
    return i;
}

int main() {
    int caught = 0;
    for (int i = 0; i < 100; i++) {
        try {
            thrower(i);
        } catch (const std::exception &) {
            caught++;
        }
    }
    std::vector<std::string> names;
    for (int i = 0; i < 100; i++) names.push_back(std::string(50 + i, 'a'));
    return caught == 50 && global_object.buf != nullptr ? 0 : 1;
}
