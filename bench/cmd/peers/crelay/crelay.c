/*
 * crelay: the two-hop floor with no runtime in the middle.
 *
 * Usage: crelay SOCKET PROGRAM [ARG...]
 *        crelay -tcp SOCKET HOST:PORT
 *
 * It listens on the Unix socket SOCKET, starts PROGRAM (the rawecho
 * server) with pipes for its stdin and stdout, prints "ready PID\n" (the
 * child's pid) on stdout, accepts one connection and relays it to the
 * child: one thread copies socket -> child stdin, the other child stdout
 * -> socket, each a blocking read() then write() of what it returned, on
 * one buffer. It parses nothing and schedules nothing: a byte that
 * arrives wakes exactly the thread blocked on it.
 *
 * The end is the Go relay's: EOF from the socket closes the child's
 * stdin, the child exits, its stdout ends, the socket is shut down and
 * the child reaped. The exit status is 0 only if every copy ended
 * cleanly and the child exited 0.
 *
 * With -tcp it is the same floor in front of an HTTP server: it listens
 * on SOCKET, prints "ready\n", and relays every connection it accepts to
 * a TCP connection of its own to HOST:PORT (an IPv4 address), with two
 * blocking threads per connection as above; what either side shuts down
 * is shut down on the other. It runs until its stdin ends.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* Each copy's buffer: a 16 KiB call and its reply fit in one read when
 * the kernel has them whole, as in the Go relay. */
enum { BUF = 64 << 10 };

struct pump {
	int src, dst;
	int err; /* errno of the failure that ended the copy, or 0 at EOF */
};

/* copy reads src and writes what each read returned to dst until src
 * ends or a call fails. */
static void copy(struct pump *p) {
	char *buf = malloc(BUF);
	if (buf == NULL) {
		p->err = ENOMEM;
		return;
	}
	for (;;) {
		ssize_t n = read(p->src, buf, BUF);
		if (n == 0)
			break;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			p->err = errno;
			break;
		}
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(p->dst, buf + off, (size_t)(n - off));
			if (w < 0) {
				if (errno == EINTR)
					continue;
				p->err = errno;
				goto out;
			}
			off += w;
		}
	}
out:
	free(buf);
}

/* up copies socket -> child stdin, then closes the child's stdin: the
 * child exits on EOF. */
static void *up(void *arg) {
	struct pump *p = arg;
	copy(p);
	close(p->dst);
	return NULL;
}

static int fail(const char *what) {
	fprintf(stderr, "crelay: %s: %s\n", what, strerror(errno));
	return 1;
}

/* A pair is one connection relayed in the -tcp mode: a copy each way, each
 * on a thread of its own; the copy that ends last closes both
 * descriptors. */
struct pair;

struct half {
	struct pump pump;
	struct pair *pair;
};

struct pair {
	struct half up, down;
	atomic_int live;
};

/* relayHalf copies one way, then shuts the destination's writing side
 * down, so that the far reader sees the end this one saw. */
static void *relayHalf(void *arg) {
	struct half *h = arg;
	copy(&h->pump);
	shutdown(h->pump.dst, SHUT_WR);
	struct pair *p = h->pair;
	if (atomic_fetch_sub(&p->live, 1) == 1) {
		close(p->up.pump.src);
		close(p->up.pump.dst);
		free(p);
	}
	return NULL;
}

/* dialTCP connects to HOST:PORT (an IPv4 address), with Nagle's delay
 * off as Go's net package leaves it. */
static int dialTCP(const char *hostport) {
	char host[64];
	const char *colon = strrchr(hostport, ':');
	if (colon == NULL || (size_t)(colon - hostport) >= sizeof host) {
		errno = EINVAL;
		return -1;
	}
	memcpy(host, hostport, (size_t)(colon - hostport));
	host[colon - hostport] = '\0';
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		errno = EINVAL;
		return -1;
	}
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	int one = 1;
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		int err = errno;
		close(fd);
		errno = err;
		return -1;
	}
	return fd;
}

/* relayTCP is the -tcp mode: it accepts on ln until stdin ends, relaying
 * each connection to one of its own to hostport. */
static int relayTCP(int ln, const char *hostport) {
	printf("ready\n");
	fflush(stdout);
	struct pollfd fds[2] = {{.fd = ln, .events = POLLIN}, {.fd = 0, .events = POLLIN}};
	for (;;) {
		if (poll(fds, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return fail("poll");
		}
		if (fds[1].revents != 0) {
			char b[64];
			ssize_t n = read(0, b, sizeof b);
			if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
				return 0; /* the harness is done: the threads end with us */
		}
		if (fds[0].revents == 0)
			continue;
		int conn = accept4(ln, NULL, NULL, SOCK_CLOEXEC);
		if (conn < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return fail("accept");
		}
		int tcp = dialTCP(hostport);
		if (tcp < 0) {
			close(conn);
			return fail("connect");
		}
		struct pair *p = calloc(1, sizeof *p);
		if (p == NULL) {
			close(conn);
			close(tcp);
			return fail("calloc");
		}
		p->up = (struct half){.pump = {.src = conn, .dst = tcp}, .pair = p};
		p->down = (struct half){.pump = {.src = tcp, .dst = conn}, .pair = p};
		atomic_init(&p->live, 2);
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_t t;
		int perr = pthread_create(&t, &attr, relayHalf, &p->up);
		if (perr == 0)
			perr = pthread_create(&t, &attr, relayHalf, &p->down);
		pthread_attr_destroy(&attr);
		if (perr != 0) {
			errno = perr;
			return fail("pthread_create");
		}
	}
}

int main(int argc, char **argv) {
	int tcpMode = argc == 4 && strcmp(argv[1], "-tcp") == 0;
	if (argc < 3 || (strcmp(argv[1], "-tcp") == 0 && !tcpMode)) {
		fprintf(stderr, "usage: crelay SOCKET PROGRAM [ARG...]\n       crelay -tcp SOCKET HOST:PORT\n");
		return 2;
	}
	if (tcpMode)
		argv++;
	/* A write to a peer that went away fails with EPIPE instead. */
	signal(SIGPIPE, SIG_IGN);
	/* The harness that started us is our only user: end with it. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);

	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	if (strlen(argv[1]) >= sizeof addr.sun_path) {
		fprintf(stderr, "crelay: socket path too long\n");
		return 2;
	}
	strcpy(addr.sun_path, argv[1]);
	int ln = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (ln < 0)
		return fail("socket");
	if (bind(ln, (struct sockaddr *)&addr, sizeof addr) < 0)
		return fail("bind");
	if (listen(ln, tcpMode ? 128 : 1) < 0)
		return fail("listen");
	if (tcpMode) {
		int rc = relayTCP(ln, argv[2]);
		unlink(argv[1]);
		return rc;
	}

	int in[2], out[2];
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
		return fail("pipe");
	pid_t pid = fork();
	if (pid < 0)
		return fail("fork");
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0)
			_exit(127);
		execv(argv[2], argv + 2);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);

	printf("ready %d\n", (int)pid);
	fflush(stdout);
	int conn = accept4(ln, NULL, NULL, SOCK_CLOEXEC);
	int acceptErr = errno;
	close(ln);
	unlink(argv[1]);
	if (conn < 0) {
		close(in[1]);
		close(out[0]);
		waitpid(pid, NULL, 0);
		errno = acceptErr;
		return fail("accept");
	}

	struct pump toChild = {.src = conn, .dst = in[1]};
	struct pump toSocket = {.src = out[0], .dst = conn};
	pthread_t t;
	int perr = pthread_create(&t, NULL, up, &toChild);
	if (perr != 0) {
		close(in[1]);
		errno = perr;
		fail("pthread_create");
	}
	copy(&toSocket);
	/* The child's stdout ended: it exited (normally because its stdin
	 * ended). Shutting the socket down also ends the other copy if the
	 * child went first. */
	shutdown(conn, SHUT_RDWR);
	if (perr == 0)
		pthread_join(t, NULL);
	close(conn);
	close(out[0]);
	int status;
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return fail("waitpid");
	}
	int rc = 0;
	if (perr != 0)
		rc = 1;
	if (toSocket.err != 0) {
		fprintf(stderr, "crelay: child to socket: %s\n", strerror(toSocket.err));
		rc = 1;
	}
	if (toChild.err != 0) {
		fprintf(stderr, "crelay: socket to child: %s\n", strerror(toChild.err));
		rc = 1;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "crelay: child %d ended with status %#x\n", (int)pid, status);
		rc = 1;
	}
	return rc;
}
