/*
 * A player's coroutine in State Threads' API (the load: players.h), shared
 * by fairness.c's built-in st server and peers/st_players.c, which builds
 * against State Threads itself too: the two run the same code per player.
 */
#ifndef BENCH_PLAYERS_ST_H
#define BENCH_PLAYERS_ST_H

#include "players.h"
#include "st.h"

/* Reads the request on the st_netfd_t arg, then streams chunks until the player goes. */
static inline void *players_st_coroutine(void *arg)
{
    static const char chunk[PLAYERS_CHUNK]; /* what every chunk carries (zeros) */
    st_netfd_t fd = arg;
    char req[PLAYERS_REQUEST_MAX];
    size_t got = 0;
    while (!players_request_complete(req, got)) {
        ssize_t n = st_read(fd, req + got, sizeof req - got, ST_UTIME_NO_TIMEOUT);
        if (n <= 0) {
            (void)st_netfd_close(fd);
            return NULL;
        }
        got += (size_t)n;
    }
    unsigned long long seed = players_seed(st_netfd_fileno(fd));
    while (st_write(fd, chunk, PLAYERS_CHUNK, ST_UTIME_NO_TIMEOUT) == PLAYERS_CHUNK &&
           st_usleep((st_utime_t)players_next_gap_us(&seed)) == 0) {
    }
    (void)st_netfd_close(fd);
    return NULL;
}

#endif /* BENCH_PLAYERS_ST_H */
