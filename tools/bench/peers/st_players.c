/*
 * The player server of the fairness benchmark (tools/bench/players.h) as a
 * program of its own, written against State Threads' API alone, so that
 * the same source builds against st and against State Threads itself and
 * `st_bench fairness --peer` measures either with the same client,
 * starvation and pinning as its built-in servers (README.md here).
 *
 * A listener coroutine loops st_accept + st_thread_create, as a media
 * server's listener does; each player's coroutine reads the request, then
 * writes a chunk and sleeps, over and over. The epoll backend
 * (ST_EVENTSYS_ALT) and each library's default stack size.
 *
 * fd 3 is the listening socket, fd 4 a pipe that gets one byte when the
 * server is about to accept; --probe prints what it runs on and exits.
 */
#include <stdio.h>
#include <unistd.h>

#include "../players_st.h"
#include "peer.h"

enum { READY_FD = 4 };

int main(int argc, char **argv)
{
    struct peer_args args;
    if (peer_parse_args(argc, argv, &args) != 0) {
        return 2;
    }
    if (st_set_eventsys(ST_EVENTSYS_ALT) != 0 || st_init() != 0) {
        perror("st_players: st_init");
        return 1;
    }
    if (args.probe) {
        printf("NOTE st_players peer: the State Threads API on %s\n", st_get_eventsys_name());
        return 0;
    }
    st_netfd_t listener = st_netfd_open_socket(PEER_LISTEN_FD);
    if (listener == NULL) {
        perror("st_players: st_netfd_open_socket");
        return 1;
    }
    char c = 'r';
    if (write(READY_FD, &c, 1) != 1) {
        perror("st_players: the ready pipe (fd 4)");
        return 1;
    }
    (void)close(READY_FD);
    for (;;) {
        st_netfd_t fd = st_accept(listener, NULL, NULL, ST_UTIME_NO_TIMEOUT);
        if (fd == NULL) {
            perror("st_players: st_accept");
            (void)st_usleep(10000);
            continue;
        }
        if (st_thread_create(players_st_coroutine, fd, 0, 0) == NULL) {
            perror("st_players: st_thread_create");
            (void)st_netfd_close(fd);
        }
    }
}
