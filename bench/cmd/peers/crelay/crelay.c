/*
 * crelay: the two-hop floor with no runtime in the middle.
 *
 * Usage: crelay SOCKET PROGRAM [ARG...]
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
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
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

int main(int argc, char **argv) {
	if (argc < 3) {
		fprintf(stderr, "usage: crelay SOCKET PROGRAM [ARG...]\n");
		return 2;
	}
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
	if (listen(ln, 1) < 0)
		return fail("listen");

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
