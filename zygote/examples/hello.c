/*
 * hello: an example handler in a shared object, run in a child forked from
 * the zygote without exec:
 *
 *   swift-run --peer b -- /.swift/bin/handlers/hello.so [WORDS...]
 *
 * It prints its arguments and, when it holds a QP, sends them to the peer
 * as one message and waits for the send to complete. Its return value is
 * swift-run's exit status.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "swift.h"

int swift_main(struct swift_fn *fn, int argc, char **argv)
{
	char text[512] = "";
	size_t n = 0;
	int i, rc;

	for (i = 1; i < argc; i++)
		n += (size_t)snprintf(text + n, n < sizeof(text) ? sizeof(text) - n : 0, "%s%s", i > 1 ? " " : "",
				      argv[i]);
	if (n >= sizeof(text))
		n = sizeof(text) - 1;
	printf("hello from %s: \"%s\" (%d QP%s, provider %s)\n", argv[0], text, fn->nqp, fn->nqp == 1 ? "" : "s",
	       fn->provider ? fn->provider : "none");
	if (fn->nqp < 1)
		return 0;
	/* 16-byte header (flags word 1: the peer's echo must not answer), then the text */
	memset(swift_send_buf(fn, fn->qp[0]), 0, 16);
	swift_send_buf(fn, fn->qp[0])[8] = 1;
	memcpy(swift_send_buf(fn, fn->qp[0]) + 16, text, n);
	if ((rc = swift_send(fn, fn->qp[0], 16 + n)) || (rc = swift_flush(fn, fn->qp[0], 5000))) {
		fprintf(stderr, "hello: send: %s\n", strerror(rc));
		return 1;
	}
	printf("hello: sent %zu bytes to %s over qpn %u\n", n, fn->qp[0]->peer, fn->qp[0]->qp->qp_num);
	return 0;
}
