/* Unix sockets in the abstract namespace (no file on any filesystem) and
 * fds carried over them with SCM_RIGHTS, the peer's pid from SO_PEERCRED:
 * the primitives under memory/fd_share.c and the NCCL RMA plugin's mesh.
 * They log nothing and return 0 or an errno value, so each caller words
 * its own errors. */
#ifndef ENGRAM_MEMORY_FD_PASS_H
#define ENGRAM_MEMORY_FD_PASS_H

#include <stddef.h>
#include <sys/types.h>

/* A socket name: the caller's prefix and 32 random hex digits, NUL included. */
#define ENGRAM_FD_PASS_NAME_LEN 48
/* Fds one message carries at most. */
#define ENGRAM_FD_PASS_MAX_FDS 64

/* *fd: an AF_UNIX socket of `type` (SOCK_STREAM or SOCK_SEQPACKET, may be
 * or-ed with SOCK_NONBLOCK; CLOEXEC always) listening with `backlog` under
 * a fresh random name written to `name` (prefix at most 15 characters).
 * Tries a few names before giving up with EADDRINUSE. */
int engram_fd_pass_listen(int type, const char *prefix, int backlog, int *fd, char name[ENGRAM_FD_PASS_NAME_LEN]);

/* *fd: a socket of `type` connected to the listener named `name`. A
 * non-blocking one may fail with EAGAIN (the listener's backlog is full). */
int engram_fd_pass_connect(int type, const char *name, int *fd);

/* The pid at the other end of a connected socket, -1 when unknown. */
pid_t engram_fd_pass_peer_pid(int fd);

/* One message: buf[0..len) with fds[0..nfds) attached (nfds at most
 * ENGRAM_FD_PASS_MAX_FDS), sent whole with MSG_NOSIGNAL | flags. EAGAIN
 * under MSG_DONTWAIT when the socket is full; EMSGSIZE for a partial send. */
int engram_fd_pass_send(int fd, const void *buf, size_t len, const int *fds, int nfds, int flags);

/* One message into buf[0..cap): *len bytes (0: the peer closed) and up to
 * max_fds fds into fds (*nfds; further ones are closed), received CLOEXEC
 * with `flags` (MSG_DONTWAIT: EAGAIN when none is there). A message larger
 * than cap (on a SOCK_SEQPACKET socket; a stream just returns cap bytes), or
 * with more fds than fit one message, is EMSGSIZE and leaves no fd open. */
int engram_fd_pass_recv(int fd, void *buf, size_t cap, size_t *len, int *fds, int max_fds, int *nfds, int flags);

#endif
