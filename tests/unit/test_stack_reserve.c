/*
 * The stack reserve (src/stack.h): stacks made ahead of need while the
 * scheduler is idle, as many as a listener's accept queue holds, so that a
 * burst of connections finds them ready.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "scheduler.h"
#include "st.h"
#include "st_config.h"
#include "stack.h"

static size_t page(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

/* A TCP socket listening on the loopback with `backlog`; its address in *addr. */
static int listen_tcp(int backlog, struct sockaddr_in *addr)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(fd, (struct sockaddr *)&sin, sizeof sin), 0);
    cr_assert_eq(listen(fd, backlog), 0);
    socklen_t len = sizeof sin;
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
    if (addr != NULL) {
        *addr = sin;
    }
    return fd;
}

/* st_accept with no wait on `fd`: the first call on a listener sets the reserve. */
static void accept_once(st_netfd_t fd, int expected_errno)
{
    errno = 0;
    cr_assert_null(st_accept(fd, NULL, NULL, 0));
    cr_assert_eq(errno, expected_errno, "errno %d", errno);
}

static struct st__stack_pool *pool_of_this_scheduler(void)
{
    return &st__sched_peek()->stacks;
}

/* Sleeps until the reserve is made, two seconds at most; whether it was. */
static bool idle_until_reserve_made(void)
{
    struct st__stack_pool *pool = pool_of_this_scheduler();
    for (int i = 0; i < 50 && st__stack_reserve_short(pool); i++) {
        cr_assert_eq(st_usleep(4 * ST__QUIET_US), 0);
    }
    return !st__stack_reserve_short(pool);
}

/* Whether the page holding `addr` is in memory. */
static bool resident(const void *addr)
{
    unsigned char in = 0;
    void *base = (void *)((uintptr_t)addr & ~(uintptr_t)(page() - 1));
    cr_assert_eq(mincore(base, page(), &in), 0);
    return (in & 1) != 0;
}

static void *return_arg(void *arg)
{
    return arg;
}

Test(stack_reserve, a_listener_has_its_accept_queue_of_stacks_made_while_idle)
{
    enum { BACKLOG = 64 };
    cr_assert_eq(st_init(), 0);
    struct st__stack_pool *pool = pool_of_this_scheduler();
    size_t made_before = pool->made;
    st_netfd_t listener = st_netfd_open_socket(listen_tcp(BACKLOG, NULL));
    cr_assert_not_null(listener);
    cr_expect_eq(pool->reserve, 0, "no reserve before an accept");
    accept_once(listener, ETIME);
    cr_expect_eq(pool->reserve, BACKLOG, "one stack for each connection the queue holds");
    cr_expect_eq(pool->made, made_before, "made when idle, not by the accept");
    cr_assert(idle_until_reserve_made());
    cr_expect_eq(pool->made, BACKLOG, "and no more");

    /* Each has the page of its coroutine object in memory. */
    size_t cached = 0;
    st__list_for_each(link, &pool->cache) {
        struct st__stack *stack = ST__CONTAINER_OF(link, struct st__stack, link);
        cr_expect(resident(stack->top - 1));
        cr_expect_geq(stack->size, (size_t)ST__DEFAULT_STACK_SIZE);
        cached++;
    }
    cr_expect_eq(cached, BACKLOG - made_before, "all but those in use wait in the cache");

    /* A burst of coroutines takes them: no stack is made for it. */
    st_thread_t threads[BACKLOG];
    int count = (int)cached;
    for (int i = 0; i < count; i++) {
        threads[i] = st_thread_create(return_arg, NULL, 1, 0);
        cr_assert_not_null(threads[i]);
    }
    cr_expect_eq(pool->made, BACKLOG);
    for (int i = 0; i < count; i++) {
        cr_assert_eq(st_thread_join(threads[i], NULL), 0);
    }
    cr_expect_eq(st_netfd_close(listener), 0);
}

Test(stack_reserve, the_largest_accept_queue_sets_it_up_to_a_cap)
{
    cr_assert_eq(st_init(), 0);
    struct st__stack_pool *pool = pool_of_this_scheduler();
    st_netfd_t small = st_netfd_open_socket(listen_tcp(16, NULL));
    st_netfd_t large = st_netfd_open_socket(listen_tcp(100, NULL));
    accept_once(large, ETIME);
    accept_once(small, ETIME);
    cr_expect_eq(pool->reserve, 100, "a smaller queue does not shrink it");

    /* The kernel caps a backlog at net.core.somaxconn (4096 by default). */
    st_netfd_t huge = st_netfd_open_socket(listen_tcp(65535, NULL));
    accept_once(huge, ETIME);
    FILE *f = fopen("/proc/sys/net/core/somaxconn", "r");
    long somaxconn = 4096;
    char line[32];
    if (f != NULL) {
        cr_assert_not_null(fgets(line, sizeof line, f));
        fclose(f);
        char *end = NULL;
        somaxconn = strtol(line, &end, 10);
        cr_assert(end != line && somaxconn > 0, "somaxconn %s", line);
    }
    size_t expected = somaxconn < (long)ST__STACK_RESERVE_MAX ? (size_t)somaxconn : ST__STACK_RESERVE_MAX;
    cr_expect_eq(pool->reserve, expected > 100 ? expected : 100);
    cr_expect_eq(st_netfd_close(small), 0);
    cr_expect_eq(st_netfd_close(large), 0);
    cr_expect_eq(st_netfd_close(huge), 0);
}

Test(stack_reserve, other_listeners_get_a_default_and_other_sockets_none)
{
    cr_assert_eq(st_init(), 0);
    struct st__stack_pool *pool = pool_of_this_scheduler();
    /* A TCP socket that does not listen: st_accept fails, nothing is reserved. */
    int tcp = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(tcp, 0);
    st_netfd_t not_listening = st_netfd_open_socket(tcp);
    accept_once(not_listening, EINVAL);
    cr_expect_eq(pool->reserve, 0);
    /* A UNIX listener: no tcp_info, so the kernel's old SOMAXCONN. */
    int unix_fd = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_geq(unix_fd, 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    cr_assert_eq(bind(unix_fd, (struct sockaddr *)&sun, sizeof(sa_family_t)), 0); /* autobind */
    cr_assert_eq(listen(unix_fd, 16), 0);
    st_netfd_t unix_listener = st_netfd_open_socket(unix_fd);
    accept_once(unix_listener, ETIME);
    cr_expect_eq(pool->reserve, 128);
    cr_expect_eq(st_netfd_close(not_listening), 0);
    cr_expect_eq(st_netfd_close(unix_listener), 0);
}

struct sized_listener {
    st_netfd_t listener;
    size_t reserve_size;
};

static void *accept_with_no_wait(void *arg)
{
    struct sized_listener *l = arg;
    accept_once(l->listener, ETIME);
    l->reserve_size = pool_of_this_scheduler()->reserve_size;
    return NULL;
}

Test(stack_reserve, its_stacks_take_the_size_of_the_accepting_coroutine)
{
    cr_assert_eq(st_init(), 0);
    struct sized_listener l = {.listener = st_netfd_open_socket(listen_tcp(8, NULL))};
    st_thread_t t = st_thread_create(accept_with_no_wait, &l, 1, (int)(40 * page()));
    cr_assert_not_null(t);
    cr_assert_eq(st_thread_join(t, NULL), 0);
    cr_expect_eq(l.reserve_size, 40 * page(), "a listener coroutine's size");
    cr_assert(idle_until_reserve_made());
    st__list_for_each(link, &pool_of_this_scheduler()->cache) {
        const struct st__stack *stack = ST__CONTAINER_OF(link, struct st__stack, link);
        cr_expect_geq(stack->size, 40 * page());
    }
    cr_expect_eq(st_netfd_close(l.listener), 0);
}

struct acceptor {
    st_netfd_t listener;
    st_netfd_t conn;
    size_t made_at_accept;
};

static void *accept_one(void *arg)
{
    struct acceptor *a = arg;
    a->conn = st_accept(a->listener, NULL, NULL, ST_UTIME_NO_TIMEOUT);
    a->made_at_accept = pool_of_this_scheduler()->made;
    return NULL;
}

Test(stack_reserve, ready_io_comes_before_making_stacks)
{
    cr_assert_eq(st_init(), 0);
    struct st__stack_pool *pool = pool_of_this_scheduler();
    struct sockaddr_in addr;
    int lfd = listen_tcp(256, &addr);
    struct acceptor a = {.listener = st_netfd_open_socket(lfd)};
    cr_assert_not_null(a.listener);
    st_thread_t acceptor = st_thread_create(accept_one, &a, 1, 0);
    cr_assert_not_null(acceptor);
    cr_assert_eq(st_usleep(0), 0); /* it runs, sets the reserve and waits */
    cr_assert_eq(pool->reserve, 256);
    cr_assert_null(a.conn);
    size_t made = pool->made;

    /* A connection is in the queue before the scheduler is next idle. */
    int client = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(client, 0);
    cr_assert_eq(connect(client, (struct sockaddr *)&addr, sizeof addr), 0);
    struct pollfd pfd = {.fd = lfd, .events = POLLIN};
    cr_assert_eq(poll(&pfd, 1, 5000), 1);

    cr_assert_eq(st_thread_join(acceptor, NULL), 0);
    cr_assert_not_null(a.conn);
    cr_expect_eq(a.made_at_accept, made, "accepted before any stack of the reserve was made");
    cr_assert(idle_until_reserve_made(), "then the reserve is made");
    cr_expect_eq(st_netfd_close(a.conn), 0);
    (void)close(client);
    cr_expect_eq(st_netfd_close(a.listener), 0);
}

Test(stack_reserve, stacks_are_made_only_after_a_quiet_spell)
{
    cr_assert_eq(st_init(), 0);
    struct st__stack_pool *pool = pool_of_this_scheduler();
    st_netfd_t listener = st_netfd_open_socket(listen_tcp(32, NULL));
    accept_once(listener, ETIME);
    size_t made = pool->made;
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(st_usleep(ST__QUIET_US / 2), 0);
    }
    cr_expect_eq(pool->made, made, "waits shorter than ST__QUIET_US make none");
    cr_assert_eq(st_usleep(4 * ST__QUIET_US), 0);
    cr_expect_eq(pool->made, 32, "a quiet spell makes them, batch after batch");
    cr_expect_eq(st_netfd_close(listener), 0);
}

Test(stack_reserve, a_pool_in_free_mode_keeps_none)
{
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_FREE, true);
    st__stack_reserve(&pool, 8, 16384);
    cr_expect_eq(pool.reserve, 0);
    cr_expect_not(st__stack_reserve_short(&pool));
    st__stack_prepare(&pool, 8);
    cr_expect_eq(pool.made, 0);
    cr_expect(st__list_empty(&pool.cache));
    st__stack_pool_fini(&pool);
}

Test(stack_reserve, prepared_stacks_are_made_in_batches_and_counted)
{
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_CACHE, true);
    st__stack_reserve(&pool, 10, 5000);
    cr_expect_eq(pool.reserve_size, 2 * page(), "rounded up to whole pages");
    st__stack_prepare(&pool, 4);
    cr_expect_eq(pool.made, 4);
    st__stack_prepare(&pool, 100);
    cr_expect_eq(pool.made, 10, "never past the reserve");
    cr_expect_not(st__stack_reserve_short(&pool));
    struct st__stack *stack = st__stack_acquire(&pool, 2 * page());
    cr_expect_eq(pool.made, 10, "a cached stack serves");
    st__stack_release(&pool, stack);
    st__stack_pool_fini(&pool);
    cr_expect_eq(pool.made, 0);
}
