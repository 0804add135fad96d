// st.h must be usable from C++: declarations inside extern "C", no C-only syntax.
#include <st.h>

#include <cstdio>

namespace {

void *worker(void *arg)
{
    auto *counter = static_cast<int *>(arg);
    for (int i = 0; i < 3; i++) {
        ++*counter;
        st_thread_yield();
    }
    return counter;
}

} // namespace

int main()
{
    if (st_init() != 0) {
        std::perror("st_init");
        return 1;
    }
    int counter = 0;
    st_thread_t t = st_thread_create(worker, &counter, 1, 0);
    void *rv = nullptr;
    if (t == nullptr || st_thread_join(t, &rv) != 0 || rv != &counter || counter != 3) {
        std::fprintf(stderr, "coroutine did not run as expected\n");
        return 1;
    }
    std::printf("ok %s\n", ST_VERSION);
    return 0;
}
