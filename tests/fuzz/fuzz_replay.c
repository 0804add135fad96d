/*
 * Runs the fuzz harness over files without libFuzzer: the corpus in
 * tests/fuzz/corpus is replayed as a regular test by every build (gcc,
 * sanitizers, coverage), and a crash file found by tools/fuzz/run.sh is
 * reproduced with `fuzz_api_replay FILE`.
 *
 *   fuzz_api_replay FILE|DIR...
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replayed;

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        return -1;
    }
    uint8_t *data = NULL;
    size_t size = 0;
    size_t cap = 0;
    for (;;) {
        if (size == cap) {
            cap = cap > 0 ? 2 * cap : 4096;
            uint8_t *grown = realloc(data, cap);
            if (grown == NULL) {
                free(data);
                fclose(f);
                return -1;
            }
            data = grown;
        }
        size_t n = fread(data + size, 1, cap - size, f);
        if (n == 0) {
            break;
        }
        size += n;
    }
    fclose(f);
    (void)LLVMFuzzerTestOneInput(data, size);
    free(data);
    replayed++;
    return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static int replay_path(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        return replay_file(path);
    }
    struct dirent **names = NULL;
    int n = scandir(path, &names, NULL, by_name);
    if (n < 0) {
        perror(path);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        char child[4096];
        if (names[i]->d_name[0] != '.' &&
            snprintf(child, sizeof(child), "%s/%s", path, names[i]->d_name) < (int)sizeof(child) &&
            replay_file(child) != 0) {
            rc = -1;
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        if (replay_path(argv[i]) != 0) {
            return 1;
        }
    }
    if (replayed == 0) {
        fprintf(stderr, "fuzz replay: no input found\n");
        return 1;
    }
    printf("fuzz replay: %d inputs, every invariant held\n", replayed);
    return 0;
}
