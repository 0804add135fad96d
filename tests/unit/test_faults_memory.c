/*
 * Failure injection, memory (docs/reliability.md keeps the site -> test
 * table): every allocation of the library (malloc, calloc, realloc) and
 * every mapping of its stacks (mmap, mprotect, munmap, madvise) fails here
 * on demand, through the wrappers of fault_table.h; every public call must
 * then report ENOMEM, give back what it had taken and leave the scheduler
 * usable. ASan and valgrind, which run the unit suite in CI, check that no
 * memory leaks.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fault_checks.h"
#include "fault_inject.h"
#include "heap.h"
#include "scheduler.h"
#include "st.h"
#include "stack.h"

Test(faults_memory, init_fails_cleanly_when_the_scheduler_cannot_be_allocated)
{
    arm(F_calloc, 1, ENOMEM);
    errno = 0;
    cr_expect_eq(st_init(), -1);
    cr_expect_eq(errno, ENOMEM);
    cr_assert_eq(st_init(), 0, "a later st_init succeeds");
    expect_usable();
}

Test(faults_memory, init_fails_cleanly_at_every_allocation)
{
    /* sched, backend state, primordial; then the idle stack and its heap slot. */
    cr_assert_eq(st_set_eventsys(ST_EVENTSYS_ALT), 0);
    for (int nth = 1; nth <= 2; nth++) {
        arm(F_calloc, nth, ENOMEM);
        errno = 0;
        cr_expect_eq(st_init(), -1, "calloc #%d", nth);
        cr_expect_eq(errno, ENOMEM);
        disarm(F_calloc);
    }
    arm(F_malloc, 1, ENOMEM);
    errno = 0;
    cr_expect_eq(st_init(), -1, "epoll's event buffer");
    cr_expect_eq(errno, ENOMEM);
    disarm(F_malloc);
    arm(F_realloc, 1, ENOMEM);
    cr_expect_eq(st_init(), -1, "heap reservation for the idle coroutine");
    arm(F_mmap64, 1, ENOMEM);
    cr_expect_eq(st_init(), -1, "idle stack");
    cr_expect_eq(errno, ENOMEM);
    arm(F_epoll_create1, 1, EMFILE);
    cr_expect_eq(st_init(), -1, "epoll instance");
    cr_expect_eq(errno, EMFILE);
    int before = open_fd_count();
    cr_assert_eq(st_init(), 0);
    cr_expect_eq(open_fd_count(), before + 1, "failed attempts leaked no epoll fd");
    expect_usable();
}

Test(faults_memory, init_reports_failure_of_the_poll_and_select_state)
{
    cr_assert_eq(st_set_eventsys(ST_EVENTSYS_POLL), 0);
    arm(F_calloc, 1, ENOMEM);
    cr_expect_eq(st_init(), -1);
    cr_assert_eq(st_init(), 0);
    st_destroy();
    cr_assert_eq(st_set_eventsys(ST_EVENTSYS_SELECT), 0);
    arm(F_calloc, 1, ENOMEM);
    cr_expect_eq(st_init(), -1);
    cr_assert_eq(st_init(), 0);
    expect_usable();
}

Test(faults_memory, thread_create_reports_enomem)
{
    cr_assert_eq(st_init(), 0);
    arm(F_mmap64, 1, ENOMEM);
    errno = 0;
    cr_expect_null(st_thread_create(return_arg, NULL, 0, 0));
    cr_expect_eq(errno, ENOMEM);
    arm(F_mprotect, 1, ENOMEM);
    errno = 0;
    cr_expect_null(st_thread_create(return_arg, NULL, 0, 0), "guard page refused");
    cr_expect_eq(errno, ENOMEM);
    expect_usable();
}

Test(faults_memory, heap_reservation_failure_fails_creation)
{
    cr_assert_eq(st_init(), 0);
    /* The first reservation holds 64 slots: the 63rd coroutine needs more. */
    st_thread_t threads[80];
    int created = 0;
    arm(F_realloc, 1, ENOMEM);
    for (int i = 0; i < 80; i++) {
        threads[i] = st_thread_create(return_arg, NULL, 1, 4096);
        if (threads[i] == NULL) {
            cr_expect_eq(errno, ENOMEM);
            break;
        }
        created++;
    }
    cr_expect_lt(created, 80, "a reservation failure must surface");
    for (int i = 0; i < created; i++) {
        cr_expect_eq(st_thread_join(threads[i], NULL), 0);
    }
    expect_usable();
}

Test(faults_memory, cond_and_mutex_allocation_failures)
{
    cr_assert_eq(st_init(), 0);
    arm(F_malloc, 1, ENOMEM);
    errno = 0;
    cr_expect_null(st_cond_new());
    cr_expect_eq(errno, ENOMEM);
    arm(F_malloc, 1, ENOMEM);
    errno = 0;
    cr_expect_null(st_mutex_new());
    cr_expect_eq(errno, ENOMEM);
}

Test(faults_memory, netfd_allocation_failure_keeps_the_fd_open)
{
    cr_assert_eq(st_init(), 0);
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    arm(F_malloc, 1, ENOMEM);
    errno = 0;
    cr_expect_null(st_netfd_open_socket(sv[0]));
    cr_expect_eq(errno, ENOMEM);
    cr_expect_geq(fcntl(sv[0], F_GETFD), 0, "the caller still owns the fd");
    st_netfd_t fd = st_netfd_open_socket(sv[0]);
    cr_expect_not_null(fd);
    cr_expect_eq(st_netfd_close(fd), 0);
    close(sv[1]);
}

Test(faults_memory, accept_closes_the_connection_it_cannot_wrap)
{
    cr_assert_eq(st_init(), 0);
    int lsock = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_geq(lsock, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof(addr.sun_path), "/tmp/st_fault_%d", (int)getpid());
    unlink(addr.sun_path);
    cr_assert_eq(bind(lsock, (struct sockaddr *)&addr, sizeof(addr)), 0);
    cr_assert_eq(listen(lsock, 4), 0);
    st_netfd_t listener = st_netfd_open_socket(lsock);
    cr_assert_not_null(listener);
    int client = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_eq(connect(client, (struct sockaddr *)&addr, sizeof(addr)), 0);
    int before = open_fd_count();
    arm(F_malloc, 1, ENOMEM);
    errno = 0;
    cr_expect_null(st_accept(listener, NULL, NULL, 100000));
    cr_expect_eq(errno, ENOMEM);
    cr_expect_eq(open_fd_count(), before, "the accepted socket was closed, not leaked");
    unlink(addr.sun_path);
    cr_expect_eq(st_netfd_close(listener), 0);
    close(client);
}

Test(faults_memory, backend_growth_failures_fail_the_wait)
{
    cr_assert_eq(st_set_eventsys(ST_EVENTSYS_ALT), 0);
    cr_assert_eq(st_init(), 0);
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int high = fcntl(sv[0], F_DUPFD, 3000);
    cr_assert_geq(high, 3000);
    struct pollfd pd = {.fd = high, .events = POLLIN};
    arm(F_realloc, 1, ENOMEM);
    errno = 0;
    cr_expect_eq(st_poll(&pd, 1, 1000), -1, "epoll fd table cannot grow");
    cr_expect_eq(errno, ENOMEM);
    cr_expect_eq(st_poll(&pd, 1, 1000), 0, "and works once memory is back");
}

Test(faults_memory, poll_backend_growth_failure_fails_the_wait)
{
    cr_assert_eq(st_set_eventsys(ST_EVENTSYS_POLL), 0);
    cr_assert_eq(st_init(), 0);
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct pollfd pd = {.fd = sv[0], .events = POLLIN};
    arm(F_realloc, 1, ENOMEM);
    errno = 0;
    cr_expect_eq(st_poll(&pd, 1, 1000), -1);
    cr_expect_eq(errno, ENOMEM);
    cr_expect_eq(st_poll(&pd, 1, 1000), 0);
}

Test(faults_memory, long_writev_copy_failure)
{
    cr_assert_eq(st_init(), 0);
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    st_netfd_t fd = st_netfd_open_socket(sv[0]);
    cr_assert_not_null(fd);
    char byte = 'x';
    struct iovec iov[40];
    for (int i = 0; i < 40; i++) {
        iov[i].iov_base = &byte;
        iov[i].iov_len = 1;
    }
    arm(F_malloc, 1, ENOMEM);
    errno = 0;
    cr_expect_eq(st_writev(fd, iov, 40, 1000000), -1);
    cr_expect_eq(errno, ENOMEM);
    cr_expect_eq(st_writev(fd, iov, 40, 1000000), 40);
    cr_expect_eq(st_netfd_close(fd), 0);
    close(sv[1]);
}

static void noop_cb(void)
{
}

Test(faults_memory, every_setter_reports_enomem_when_the_scheduler_cannot_be_allocated)
{
    int key = -1;
    arm(F_calloc, 1, ENOMEM);
    EXPECT_FAIL(st_set_eventsys(ST_EVENTSYS_POLL), ENOMEM);
    arm(F_calloc, 1, ENOMEM);
    EXPECT_FAIL(st_key_create(&key, NULL), ENOMEM);
    arm(F_calloc, 1, ENOMEM);
    EXPECT_FAIL(st_set_utime_function(NULL), ENOMEM);
    arm(F_calloc, 1, ENOMEM);
    EXPECT_FAIL(st_timecache_set(1), ENOMEM);
    arm(F_calloc, 1, ENOMEM);
    EXPECT_FAIL(st_randomize_stacks(1), ENOMEM);
    arm(F_calloc, 1, ENOMEM);
    EXPECT_FAIL_NULL(st_set_switch_in_cb(noop_cb), ENOMEM);
    arm(F_calloc, 1, ENOMEM);
    EXPECT_FAIL_NULL(st_set_switch_out_cb(noop_cb), ENOMEM);
    arm(F_calloc, 1, ENOMEM);
    int here;
    st_set_primordial_stack(&here, &here); /* nothing to report, nothing to crash */
    arm(F_calloc, 1, ENOMEM);
    EXPECT_FAIL(st_init(), ENOMEM);
    cr_expect_eq(key, -1);
    cr_expect_eq(st_get_eventsys(), -1, "no scheduler was left half made");
    init_with(ST_EVENTSYS_POLL);
    expect_usable();
}

Test(faults_memory, idle_coroutine_failures_leave_no_epoll_fd_behind)
{
    int before = open_fd_count();
    cr_assert_eq(st_set_eventsys(ST_EVENTSYS_ALT), 0);
    arm(F_mprotect, 1, ENOMEM);
    EXPECT_FAIL(st_init(), ENOMEM); /* the idle coroutine's guard page */
    arm(F_calloc, 2, ENOMEM);
    EXPECT_FAIL(st_init(), ENOMEM); /* the primordial coroutine, after the epoll fd */
    cr_expect_eq(open_fd_count(), before, "failed st_init calls closed their epoll fd");
    init_with(-1);
    expect_usable_then_clean_destroy(before);
}

/*
 * epoll's event buffer grows with the registered descriptors (every ready one
 * fits in one epoll_wait): a growth that fails refuses the wait that needed
 * it, with ENOMEM and every registration of that wait rolled back.
 */
Test(faults_memory, epoll_event_buffer_growth_failure_refuses_the_wait)
{
    enum { NFDS = 300 };
    static struct pollfd pds[NFDS];
    int sv[2];
    init_with(ST_EVENTSYS_ALT);
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    for (int i = 0; i < NFDS; i++) {
        pds[i] = (struct pollfd){.fd = dup(sv[0]), .events = POLLIN};
        cr_assert_geq(pds[i].fd, 0);
    }
    /* The per-fd table first (its chunk table grows by realloc too), with few registrations. */
    cr_expect_eq(st_poll(pds, 64, 0), 0);
    cr_expect_eq(st_poll(&pds[NFDS - 1], 1, 0), 0);
    arm(F_realloc, 1, ENOMEM);
    EXPECT_FAIL(st_poll(pds, NFDS, 0), ENOMEM);
    cr_expect_eq(faults[F_realloc].calls, 1);
    disarm(F_realloc);
    cr_expect_eq(st_poll(pds, NFDS, 0), 0, "the same wait works once memory is there");
    cr_assert_eq(write(sv[1], "x", 1), 1);
    cr_expect_eq(st_poll(pds, NFDS, 1000000), NFDS);
    for (int i = 0; i < NFDS; i++) {
        close(pds[i].fd);
    }
    close(sv[0]);
    close(sv[1]);
    expect_usable();
}

/* ---- stacks -------------------------------------------------------------------- */

Test(faults_memory, guard_page_failure_unmaps_and_a_failed_unmap_is_survived)
{
    init_with(-1);
    arm(F_mprotect, 1, ENOMEM);
    arm(F_munmap, 1, EINVAL); /* the clean-up of the half-made stack fails too */
    EXPECT_FAIL_NULL(st_thread_create(return_arg, NULL, 1, 0), ENOMEM);
    cr_expect_eq(faults[F_munmap].calls, 1);
    expect_usable();
    /* Teardown with every unmap failing: nothing crashes, st_destroy completes. */
    arm_times(F_munmap, 1, EINVAL, 1000);
    st_destroy();
    disarm(F_munmap);
    cr_expect_eq(st_get_eventsys(), -1);
    init_with(-1);
    expect_usable();
}

/* Skips the calling test, saying why, on a kernel without guard markers. */
static void require_guard_markers(void)
{
    if (!st__stack_guard_markers_supported()) {
        cr_skip_test("this kernel has no page-table guard markers (MADV_GUARD_INSTALL, Linux 6.13)");
    }
}

Test(faults_memory, guard_marker_failure_reports_enomem_and_gives_the_range_back)
{
    require_guard_markers();
    init_with(-1);
    struct st__stack_pool *pool = &st__sched_peek()->stacks;
    st__stacks_alone_max = 0; /* from slabs at once */
    st_thread_t first = st_thread_create(return_arg, NULL, 1, 0);
    cr_assert_not_null(first);
    char *next = pool->carve_next;
    arm(F_madvise, 1, ENOMEM);
    EXPECT_FAIL_NULL(st_thread_create(return_arg, NULL, 1, 0), ENOMEM);
    cr_expect_eq(pool->carve_next, next, "the slab range of the failed stack is free again");
    cr_assert_eq(st_thread_join(first, NULL), 0);
    expect_usable();
}

Test(faults_memory, a_refused_split_leaves_a_burst_guarded_by_markers)
{
    require_guard_markers();
    if (!st__stack_quick_in_slabs()) {
        cr_skip_test("under valgrind, quick stacks are made alone (st__stack_quick_in_slabs)");
    }
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_CACHE, true);
    struct st__stack *a = st__stack_acquire_quick(&pool, 16384);
    struct st__stack *b = st__stack_acquire_quick(&pool, 16384);
    cr_assert_not_null(a);
    cr_assert_not_null(b);
    arm(F_mprotect, 1, ENOMEM); /* out of mappings */
    st__stack_split(&pool, 2);
    cr_expect(fired(F_mprotect));
    cr_expect(st__list_empty(&pool.unsplit), "no retry at every wait: the queue is dropped");
    disarm(F_mprotect);
    struct st__stack *c = st__stack_acquire_quick(&pool, 16384);
    cr_assert_not_null(c, "the pool goes on");
    st__stack_split(&pool, 1);
    cr_expect(st__list_empty(&pool.unsplit));
    st__stack_release(&pool, a);
    st__stack_release(&pool, b);
    st__stack_release(&pool, c);
    st__stack_pool_fini(&pool);
}

/* Skips the calling test, saying why, where a burst's stacks are not carved from slabs. */
static void require_quick_stacks(void)
{
    require_guard_markers();
    if (!st__stack_quick_in_slabs()) {
        cr_skip_test("under valgrind, quick stacks are made alone (st__stack_quick_in_slabs)");
    }
}

Test(faults_memory, a_refused_list_of_guards_falls_back_to_one_call_a_stack)
{
    require_quick_stacks();
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_CACHE, true);
    arm(F_process_madvise, 1, EINVAL); /* a kernel before PIDFD_SELF, or a seccomp filter */
    faults[F_madvise].calls = 0;
    errno = EDOM;
    struct st__stack *stacks[ST__STACK_BATCH + 1];
    stacks[0] = st__stack_acquire_quick(&pool, 16384);
    cr_assert_not_null(stacks[0]);
    cr_expect(fired(F_process_madvise));
    cr_expect_eq(errno, EDOM, "the refusal leaves errno alone");
    cr_expect_eq(pool.made, ST__STACK_BATCH, "the batch is made all the same");
    cr_expect_eq(faults[F_madvise].calls, ST__STACK_BATCH, "a guard marker a call");
    for (int i = 1; i <= ST__STACK_BATCH; i++) {
        stacks[i] = st__stack_acquire_quick(&pool, 16384);
        cr_assert_not_null(stacks[i]);
    }
    cr_expect_eq(pool.made, 2 * ST__STACK_BATCH);
    cr_expect_eq(faults[F_process_madvise].calls, 1, "the list is not offered again");
    cr_expect_eq(faults[F_madvise].calls, 2 * ST__STACK_BATCH);
    for (int i = 0; i <= ST__STACK_BATCH; i++) {
        st__stack_release(&pool, stacks[i]);
    }
    st__stack_pool_fini(&pool);
}

Test(faults_memory, a_guard_the_kernel_refuses_ends_the_batch_there)
{
    require_quick_stacks();
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_CACHE, true);
    arm(F_process_madvise, 1, EINVAL);
    arm(F_madvise, 1, ENOMEM);
    EXPECT_FAIL_NULL(st__stack_acquire_quick(&pool, 16384), ENOMEM);
    cr_expect_eq(pool.made, 0);
    const struct st__slab *slab = ST__CONTAINER_OF(st__list_first(&pool.slabs), struct st__slab, link);
    cr_expect_eq(pool.carve_next, slab->base, "the whole batch's range is free again");
    arm(F_madvise, 4, ENOMEM); /* three guards, then out of memory (the list was refused above) */
    struct st__stack *stack = st__stack_acquire_quick(&pool, 16384);
    cr_assert_not_null(stack, "the stacks that got their guards are made");
    cr_expect_eq(stack->map_base, slab->base);
    cr_expect_eq(pool.made, 3);
    cr_expect_eq(pool.carve_next, slab->base + 3 * stack->map_size, "the rest goes back to the slab");
    st__stack_release(&pool, stack);
    st__stack_pool_fini(&pool);
}

Test(faults_memory, a_stack_the_reserve_cannot_have_shrinks_the_reserve)
{
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_CACHE, false);
    st__stack_reserve(&pool, 8, 16384);
    arm(F_mmap64, 1, ENOMEM);
    errno = EDOM;
    st__stack_prepare(&pool, 8);
    cr_expect(fired(F_mmap64));
    cr_expect_eq(errno, EDOM, "the idle loop's errno is left alone");
    cr_expect_eq(pool.made, 0);
    cr_expect_not(st__stack_reserve_short(&pool), "no new try at every quiet spell");
    struct st__stack *stack = st__stack_acquire(&pool, 16384);
    cr_assert_not_null(stack, "the pool goes on");
    st__stack_reserve(&pool, 4, 16384);
    st__stack_prepare(&pool, 8);
    cr_expect_eq(pool.made, 4, "and a later reserve is made");
    st__stack_release(&pool, stack);
    st__stack_pool_fini(&pool);
}

Test(faults_memory, slab_failures_report_enomem_and_free_the_slab_record)
{
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_CACHE, false);
    arm(F_malloc, 1, ENOMEM);
    EXPECT_FAIL_NULL(st__stack_acquire(&pool, 16384), ENOMEM);
    arm(F_mmap64, 1, ENOMEM);
    EXPECT_FAIL_NULL(st__stack_acquire(&pool, 16384), ENOMEM);
    struct st__stack *stack = st__stack_acquire(&pool, 16384);
    cr_assert_not_null(stack, "the pool works once memory is back");
    st__stack_release(&pool, stack);
    st__stack_pool_fini(&pool);
}

Test(faults_memory, failed_madvise_on_a_released_slab_stack_keeps_the_pool_consistent)
{
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_FREE, false);
    struct st__stack *stack = st__stack_acquire(&pool, 16384);
    cr_assert_not_null(stack);
    char *bottom = stack->bottom;
    st__stack_release(&pool, stack);
    arm(F_madvise, 1, EINVAL);
    st__stack_reclaim(&pool);
    cr_expect_eq(faults[F_madvise].calls, 1);
    struct st__stack *again = st__stack_acquire(&pool, 16384);
    cr_assert_not_null(again);
    cr_expect_eq(again->bottom, bottom, "the range is reused all the same");
    st__stack_release(&pool, again);
    st__stack_pool_fini(&pool);
}

Test(faults_memory, heap_growth_refuses_absurd_counts)
{
    struct st__heap heap;
    st__heap_init(&heap);
    EXPECT_FAIL(st__heap_grow(&heap, SIZE_MAX), ENOMEM);
    EXPECT_FAIL(st__heap_grow(&heap, SIZE_MAX / 2), ENOMEM);
    cr_expect_eq(heap.capacity, 0U);
    st__heap_fini(&heap);
}

/* ---- waits: pollset links, backend state -------------------------------------- */

Test(faults_memory, long_pollfd_arrays_report_enomem_on_every_backend)
{
    for (size_t b = 0; b < sizeof(all_backends) / sizeof(all_backends[0]); b++) {
        init_with(all_backends[b]);
        int before = open_fd_count();
        st_netfd_t ends[10];
        struct pollfd pds[5];
        for (int i = 0; i < 5; i++) {
            socketpair_netfds(&ends[2 * i], &ends[2 * i + 1]);
            pds[i].fd = st_netfd_fileno(ends[2 * i]);
            pds[i].events = POLLOUT;
        }
        arm(F_malloc, 1, ENOMEM);
        EXPECT_FAIL(st_poll(pds, 5, 100000), ENOMEM);
        cr_expect_eq(st_poll(pds, 5, 100000), 5, "%s: works once memory is back",
                     st_get_eventsys_name());
        for (int i = 0; i < 10; i++) {
            cr_expect_eq(st_netfd_close(ends[i]), 0, "no waiter was left registered");
        }
        cr_expect_eq(open_fd_count(), before);
        expect_usable();
        st_destroy();
    }
}

Test(faults_memory, epoll_chunk_failures_roll_back_the_whole_wait)
{
    init_with(ST_EVENTSYS_ALT);
    st_netfd_t low;
    st_netfd_t peer;
    socketpair_netfds(&low, &peer);
    int high = fcntl(st_netfd_fileno(peer), F_DUPFD, 300); /* the second chunk of 256 */
    cr_assert_geq(high, 300);
    struct pollfd pds[2] = {{.fd = st_netfd_fileno(low), .events = POLLIN},
                            {.fd = high, .events = POLLIN}};
    arm(F_calloc, 1, ENOMEM);
    EXPECT_FAIL(st_poll(pds, 2, 1000), ENOMEM);
    cr_expect_eq(st_netfd_close(low), 0, "the first pollfd was unregistered again");
    arm(F_calloc, 1, ENOMEM);
    EXPECT_FAIL_NULL(st_netfd_open_socket(high), ENOMEM);
    cr_expect_neq(fcntl(high, F_GETFD), -1, "the caller keeps its descriptor");
    st_netfd_t h = st_netfd_open_socket(high);
    cr_assert_not_null(h);
    close_both_then_expect_usable(h, peer);
}

Test(faults_memory, epoll_table_growth_failure_rolls_back_earlier_pollfds)
{
    init_with(ST_EVENTSYS_ALT);
    st_netfd_t low;
    st_netfd_t peer;
    socketpair_netfds(&low, &peer);
    int high = fcntl(st_netfd_fileno(peer), F_DUPFD, 3000); /* beyond the first table */
    cr_assert_geq(high, 3000);
    struct pollfd pds[2] = {{.fd = st_netfd_fileno(low), .events = POLLIN},
                            {.fd = high, .events = POLLIN}};
    arm(F_realloc, 1, ENOMEM);
    EXPECT_FAIL(st_poll(pds, 2, 1000), ENOMEM);
    cr_expect_eq(st_netfd_close(low), 0);
    close(high);
    cr_expect_eq(st_netfd_close(peer), 0);
    expect_usable();
}
