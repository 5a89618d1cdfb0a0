#include <cstdio>
#include <cstring>

int main(int argc, char** argv)
{
    if (argc == 2 && std::strcmp(argv[1], "--version") == 0) {
        std::printf("quantscope-cli %s\n", QUANTSCOPE_VERSION);
        return 0;
    }
    std::fprintf(stderr, "usage: quantscope-cli --version\n");
    return 2;
}
