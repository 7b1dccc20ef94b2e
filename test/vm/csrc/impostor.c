/* impostor: the VM impostor scenario's attacker, a key holder that speaks
 * under another zygote's name. It runs one exchange of the zygotes' own
 * protocol (zygote/exchange.c) from outside any zygote: a later exchange
 * (flags 0, not a first one) naming the server's QPs with the victim in
 * `replaces`, so that a server that honoured it would drop them. It has
 * no link with the server, and proves one it made up.
 *
 * Usage: impostor CONFIG KEYRING PEER QPN...
 *   CONFIG   a pool description: name (the victim's), tenant, the peer
 *   KEYRING  the tenant's keyring (the impostor holds the key)
 *   QPN...   the server's own QP numbers to name in replaces (1 to 8): those
 *            a rebuild by the victim would replace
 * Prints "impostor: done" when the server served it, else
 * "impostor: refused: <why>"; exits 0 either way (2 on bad usage).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include "sha256.h"
#include "exchange.h"
#include "util.h"

struct impostor {
	struct xconn link; /* the link it claims */
	uint32_t next_qpn;
};

static int op_create(void *ctx, int peer, struct swift_qpinfo *local, char *err, size_t errlen)
{
	struct impostor *m = ctx;

	(void)peer;
	(void)err;
	(void)errlen;
	memset(local, 0, sizeof(*local));
	local->qpn = m->next_qpn++;
	local->psn = 0x4242;
	return (int)(local->qpn & 0xff);
}

static int op_connect(void *ctx, int row, const struct swift_qpinfo *remote)
{
	(void)ctx;
	(void)row;
	(void)remote;
	return 0;
}

static void op_destroy(void *ctx, int row)
{
	(void)ctx;
	(void)row;
}

static const struct xconn *op_link(void *ctx, int peer)
{
	(void)peer;
	return &((struct impostor *)ctx)->link;
}

int main(int argc, char **argv)
{
	static struct swift_cfg cfg;
	static struct swift_key keys[SWIFT_KEYS_MAX];
	static struct impostor m;
	static struct xconn x;
	uint32_t replaces[8];
	uint8_t ring[4097];
	char err[256];
	struct swift_rowops ops = {.ctx = &m,
				   .create = op_create,
				   .connect = op_connect,
				   .destroy = op_destroy,
				   .link = op_link};
	struct swift_xenv env = {.cfg = &cfg, .keys = keys, .ops = &ops};
	struct in_addr in;
	ssize_t n;
	int fd, count, i;

	if (argc < 5 || argc > 12) {
		fprintf(stderr, "usage: impostor CONFIG KEYRING PEER QPN...\n");
		return 2;
	}
	if (swift_cfg_load(&cfg, argv[1], err, sizeof(err))) {
		fprintf(stderr, "impostor: %s\n", err);
		return 2;
	}
	fd = open(argv[2], O_RDONLY | O_CLOEXEC);
	n = fd < 0 ? -1 : read(fd, ring, sizeof(ring));
	if (fd >= 0)
		close(fd);
	if (n <= 0 || n > 4096 ||
	    (env.nkeys = swift_keys_parse(ring, (size_t)n, keys, SWIFT_KEYS_MAX, err, sizeof(err))) < 1) {
		fprintf(stderr, "impostor: keyring %s unreadable\n", argv[2]);
		return 2;
	}
	/* it holds the tenant key (the node's root does), so it makes the
	 * pair key of the name it claims and its victim's, as the shim would:
	 * HMAC(k, "swift-pair" 0 tenant 0 lo 0 hi) */
	for (i = 0; i < env.nkeys; i++) {
		const char *lo = strcmp(cfg.name, argv[3]) < 0 ? cfg.name : argv[3];
		const char *hi = lo == cfg.name ? argv[3] : cfg.name;
		uint8_t msg[11 + 3 * SWIFT_NAME_MAX], out[32];
		size_t ml = 0;

		memcpy(msg, "swift-pair", 11);
		ml = 11;
		memcpy(msg + ml, cfg.tenant, strlen(cfg.tenant) + 1);
		ml += strlen(cfg.tenant) + 1;
		memcpy(msg + ml, lo, strlen(lo) + 1);
		ml += strlen(lo) + 1;
		memcpy(msg + ml, hi, strlen(hi));
		ml += strlen(hi);
		hmac_sha256(keys[i].key, keys[i].len, msg, ml, out);
		memcpy(keys[i].key, out, 32);
		keys[i].len = 32;
		snprintf(keys[i].peer, sizeof(keys[i].peer), "%s", argv[3]);
	}
	i = swift_find_peer(&cfg, argv[3]);
	if (i < 0 || inet_pton(AF_INET, cfg.peers[i].host, &in) != 1) {
		fprintf(stderr, "impostor: peer %s is not in %s with an IPv4 address\n", argv[3], argv[1]);
		return 2;
	}
	count = argc - 4;
	for (int j = 0; j < count; j++)
		replaces[j] = (uint32_t)strtoul(argv[4 + j], NULL, 10);
	/* a link it did not take part in: any link secret will do (its own
	 * first exchange with ib would have made one, which is not the one
	 * ib holds with ia) */
	m.link.key = 0;
	m.link.flags = SWIFT_X_LINK;
	if (getrandom(m.link.link, sizeof(m.link.link), 0) != sizeof(m.link.link))
		return 2;
	m.next_qpn = 0x7000;
	fd = swift_dial(in.s_addr, cfg.peers[i].port, 0);
	if (fd < 0) {
		printf("impostor: refused: connect %s:%d: %s\n", cfg.peers[i].host, cfg.peers[i].port, strerror(errno));
		return 0;
	}
	swift_xconn_client(&x, &env, i, count, 0, NULL, replaces);
	if (swift_xconn_run(fd, &x, &env, 10000) == XC_DONE)
		printf("impostor: done\n");
	else
		printf("impostor: refused: %s\n", x.err);
	close(fd);
	return 0;
}
