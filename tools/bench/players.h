/*
 * The load of the fairness benchmark (fairness.c), as its servers see it:
 * players of a live-streaming media server (HTTP-FLV). A player sends a
 * small HTTP GET; the server reads it and from then on writes a 4 KiB chunk
 * to that player, then pauses 10-40 ms, over and over, the pauses drawn
 * from a PRNG seeded by the player's descriptor. Shared by the servers
 * built into st_bench and the peer player servers (peers/st_players.c),
 * which build against any library with State Threads' API, so that every
 * server streams the same chunks on the same schedule.
 */
#ifndef BENCH_PLAYERS_H
#define BENCH_PLAYERS_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

enum {
    PLAYERS_CHUNK = 4096,      /* bytes of every chunk */
    PLAYERS_REQUEST_MAX = 512, /* room for a request: more counts as complete */
    PLAYERS_GAP_MIN_MS = 10,
    PLAYERS_GAP_SPAN_MS = 31, /* pauses of 10..40 ms */
};

/* xorshift64*: small, fast, and the same sequence everywhere. */
static inline unsigned long long players_random(unsigned long long *state)
{
    unsigned long long x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* The PRNG state of the player on descriptor fd. */
static inline unsigned long long players_seed(int fd)
{
    return 0x9E3779B97F4A7C15ULL ^ ((unsigned long long)fd << 17);
}

/* The pause before a player's next chunk, in microseconds. */
static inline long long players_next_gap_us(unsigned long long *seed)
{
    return (PLAYERS_GAP_MIN_MS + (long long)(players_random(seed) % PLAYERS_GAP_SPAN_MS)) * 1000;
}

/* Whether buf[0..len) holds the whole request: its header's end, or all the room there is. */
static inline bool players_request_complete(const char *buf, size_t len)
{
    return len == PLAYERS_REQUEST_MAX || (len >= 4 && memcmp(buf + len - 4, "\r\n\r\n", 4) == 0);
}

#endif /* BENCH_PLAYERS_H */
