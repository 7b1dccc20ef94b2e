/* The pool description file the shim writes (one "key value" per line). */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cfg.h"
#include "util.h"

int swift_parse_hostport(const char *s, char *host, size_t hlen, int *port)
{
	const char *colon = strrchr(s, ':');
	char *end;
	long p;
	size_t n;

	if (!colon)
		return -1;
	n = (size_t)(colon - s);
	if (n == 0 || n >= hlen)
		return -1;
	memcpy(host, s, n);
	host[n] = 0;
	errno = 0;
	p = strtol(colon + 1, &end, 10);
	if (errno || *end || p < 1 || p > 65535)
		return -1;
	*port = (int)p;
	return 0;
}

static int copy(char *dst, size_t n, const char *v)
{
	if (strlen(v) >= n)
		return -1;
	strcpy(dst, v);
	return 0;
}

/* printable: names travel in the exchange and into logs */
static int printable(const char *v)
{
	for (; *v; v++)
		if (*v <= ' ' || *v > '~')
			return 0;
	return 1;
}

int swift_find_peer(const struct swift_cfg *c, const char *name)
{
	int i;

	for (i = 0; i < c->npeers; i++)
		if (!strcmp(c->peers[i].name, name))
			return i;
	return -1;
}

int swift_names_peer(const char *self, const char *want, const char *peer)
{
	const char *ns = strchr(self, '.');
	size_t n = strlen(want);

	if (!strcmp(want, peer))
		return 1;
	return ns && !strchr(want, '.') && !strncmp(peer, want, n) && !strcmp(peer + n, ns);
}

int swift_peer_named(const char *self, const char *const *names, int n, const char *want)
{
	int i;

	for (i = 0; i < n; i++)
		if (!strcmp(names[i], want))
			return i;
	for (i = 0; i < n; i++)
		if (swift_names_peer(self, want, names[i]))
			return i;
	return -1;
}

int swift_find_peer_named(const struct swift_cfg *c, const char *want)
{
	const char *names[SWIFT_MAX_PEERS];
	int i;

	for (i = 0; i < c->npeers; i++)
		names[i] = c->peers[i].name;
	return swift_peer_named(c->name, names, c->npeers, want);
}

static int number(const char *v, long lo, long hi, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(v, &end, 10);
	return (errno || *end || *out < lo || *out > hi) ? -1 : 0;
}

/* digits reads a decimal number of 1 to 5 digits (no sign, no space) at
 * *s up to max, and moves *s past it; -1 if there is none or it is more. */
static long digits(const char **s, long max)
{
	long v = 0;
	int n = 0;

	while (**s >= '0' && **s <= '9' && n < 6) {
		v = v * 10 + (**s - '0');
		(*s)++;
		n++;
	}
	return n == 0 || n > 5 || v > max ? -1 : v;
}

/* parse_accept reads "none", an IPv4 network "A.B.C.D/N" exactly, or an
 * IPv6 one (the exchange listens on IPv4 only, so those admit nobody
 * here). */
static int parse_accept(struct swift_cfg *c, const char *v)
{
	const char *slash = strchr(v, '/'), *q;
	char addr[INET_ADDRSTRLEN];
	struct in_addr in;
	long n;

	c->accept_only = 1;
	if (!strcmp(v, "none") || strchr(v, ':'))
		return strchr(v, '/') == NULL && strcmp(v, "none") != 0;
	if (!slash || slash - v >= (long)sizeof(addr) || c->naccept == SWIFT_MAX_PEERS)
		return 1;
	memcpy(addr, v, (size_t)(slash - v));
	addr[slash - v] = 0;
	q = slash + 1;
	if (inet_pton(AF_INET, addr, &in) != 1 || (n = digits(&q, 32)) < 0 || *q)
		return 1;
	c->accept[c->naccept].mask = n ? 0xffffffffu << (32 - n) : 0;
	c->accept[c->naccept].net = ntohl(in.s_addr) & c->accept[c->naccept].mask;
	c->naccept++;
	return 0;
}

/* parse_dial reads "none" or "A.B.C.D/N LO-HI" exactly (IPv4 only: the
 * exchange dials IPv4). */
static int parse_dial(struct swift_cfg *c, const char *v)
{
	const char *slash = strchr(v, '/'), *q;
	char addr[INET_ADDRSTRLEN];
	struct in_addr in;
	long n, lo, hi;

	c->dial_only = 1;
	if (!strcmp(v, "none"))
		return 0;
	if (!slash || slash - v >= (long)sizeof(addr) || c->ndial == SWIFT_MAX_PEERS)
		return 1;
	memcpy(addr, v, (size_t)(slash - v));
	addr[slash - v] = 0;
	if (inet_pton(AF_INET, addr, &in) != 1)
		return 1;
	q = slash + 1;
	if ((n = digits(&q, 32)) < 0 || *q++ != ' ' || (lo = digits(&q, 65535)) < 1 || *q++ != '-' ||
	    (hi = digits(&q, 65535)) < lo || *q)
		return 1;
	c->dial[c->ndial].mask = n ? 0xffffffffu << (32 - n) : 0;
	c->dial[c->ndial].net = ntohl(in.s_addr) & c->dial[c->ndial].mask;
	c->dial[c->ndial].lo = (int)lo;
	c->dial[c->ndial].hi = (int)hi;
	c->ndial++;
	return 0;
}

/* swift_cfg_dials tells whether a peer may be dialed at addr (IPv4,
 * network byte order) and port. */
int swift_cfg_dials(const struct swift_cfg *c, uint32_t addr, int port)
{
	uint32_t h = ntohl(addr);
	int i;

	if (!c->dial_only)
		return 1;
	for (i = 0; i < c->ndial; i++)
		if ((h & c->dial[i].mask) == c->dial[i].net && port >= c->dial[i].lo && port <= c->dial[i].hi)
			return 1;
	return 0;
}

/* swift_cfg_accepts tells whether an exchange connection from addr (IPv4,
 * network byte order) may go on. */
int swift_cfg_accepts(const struct swift_cfg *c, uint32_t addr)
{
	uint32_t h = ntohl(addr);
	int i;

	if (!c->accept_only)
		return 1;
	for (i = 0; i < c->naccept; i++)
		if ((h & c->accept[i].mask) == c->accept[i].net)
			return 1;
	return 0;
}

/* cfg_defaults: the description before its file is read. */
static void cfg_defaults(struct swift_cfg *c)
{
	memset(c, 0, sizeof(*c));
	strcpy(c->name, "zygote");
	strcpy(c->tenant, "default");
	c->port = 1;
	c->gid_index = -1;
	c->pool = 1;
	strcpy(c->listen_host, "0.0.0.0");
	c->listen_port = 18515;
	strcpy(c->socket_path, "/run/swift/zygote.sock");
	c->msg_size = 4096;
	c->allow_new_dest = 1;
}

/* parse_peer adds the peer of a "peer NAME HOST:PORT" line (v: what
 * follows the key); 1 when it is bad, a name seen already, or one too
 * many. */
static int parse_peer(struct swift_cfg *c, char *v)
{
	struct swift_peer *p;
	char *addr = v;
	int bad;

	if (c->npeers == SWIFT_MAX_PEERS)
		return 1;
	p = &c->peers[c->npeers];
	while (*addr && !isspace((unsigned char)*addr))
		addr++;
	if (*addr)
		*addr++ = 0;
	while (isspace((unsigned char)*addr))
		addr++;
	bad = copy(p->name, sizeof(p->name), v) || !*p->name || !printable(p->name) ||
	      swift_find_peer(c, p->name) >= 0 || swift_parse_hostport(addr, p->host, sizeof(p->host), &p->port);
	if (!bad)
		c->npeers++;
	return bad;
}

/* cfg_set sets key k to v: 0, 1 for a bad value, -1 for an unknown key. */
static int cfg_set(struct swift_cfg *c, const char *k, char *v)
{
	long n;
	int bad;

	if (!strcmp(k, "name"))
		bad = copy(c->name, sizeof(c->name), v) || !*v || !printable(v);
	else if (!strcmp(k, "tenant"))
		bad = copy(c->tenant, sizeof(c->tenant), v) || !*v || !printable(v);
	else if (!strcmp(k, "device"))
		bad = copy(c->device, sizeof(c->device), v);
	else if (!strcmp(k, "port"))
		bad = number(v, 1, 255, &n) || ((c->port = (int)n), 0);
	else if (!strcmp(k, "gid_index"))
		bad = number(v, -1, 255, &n) || ((c->gid_index = (int)n), 0);
	else if (!strcmp(k, "pool"))
		bad = number(v, 0, SWIFT_MAX_QPS, &n) || ((c->pool = (int)n), 0);
	else if (!strcmp(k, "msg_size"))
		bad = number(v, 64, 1 << 20, &n) || ((c->msg_size = (size_t)n), 0);
	else if (!strcmp(k, "new_dest"))
		bad = number(v, 0, 1, &n) || ((c->allow_new_dest = (int)n), 0);
	else if (!strcmp(k, "qp_limit"))
		bad = number(v, 1, 1 << 24, &n) || ((c->qp_limit = (int)n), 0);
	else if (!strcmp(k, "remote_access"))
		bad = number(v, 0, 1, &n) || ((c->remote_access = (int)n), 0);
	else if (!strcmp(k, "function_uids"))
		bad = number(v, 1, 0xfffffffeL - SWIFT_MAX_CHILDREN, &n) || ((c->function_uid_base = (uint32_t)n), 0);
	else if (!strcmp(k, "listen"))
		bad = swift_parse_hostport(v, c->listen_host, sizeof(c->listen_host), &c->listen_port);
	else if (!strcmp(k, "socket"))
		bad = copy(c->socket_path, sizeof(c->socket_path), v);
	else if (!strcmp(k, "key_file"))
		bad = copy(c->key_file, sizeof(c->key_file), v);
	else if (!strcmp(k, "key_pipe"))
		bad = number(v, 3, 1023, &n) || ((c->key_pipe = (int)n), 0);
	else if (!strcmp(k, "accept"))
		bad = parse_accept(c, v);
	else if (!strcmp(k, "dial"))
		bad = parse_dial(c, v);
	else if (!strcmp(k, "peer"))
		bad = parse_peer(c, v);
	else
		return -1;
	return bad != 0;
}

int swift_cfg_load(struct swift_cfg *c, const char *path, char *err, size_t errlen)
{
	char line[1024];
	int lineno = 0;
	FILE *f;

	cfg_defaults(c);
	f = fopen(path, "r");
	if (!f) {
		snprintf(err, errlen, "open %s: %s", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char *k = line, *v, *nl;
		int rc;

		lineno++;
		if ((nl = strchr(line, '\n')))
			*nl = 0;
		while (isspace((unsigned char)*k))
			k++;
		if (!*k || *k == '#')
			continue;
		v = k;
		while (*v && !isspace((unsigned char)*v))
			v++;
		if (*v)
			*v++ = 0;
		while (isspace((unsigned char)*v))
			v++;
		rc = cfg_set(c, k, v);
		if (rc) {
			if (rc < 0)
				snprintf(err, errlen, "%s:%d: unknown key %s", path, lineno, k);
			else
				snprintf(err, errlen, "%s:%d: bad value for %s: %s", path, lineno, k, v);
			fclose(f);
			return -1;
		}
	}
	fclose(f);
	if (c->pool * c->npeers > SWIFT_MAX_QPS) {
		snprintf(err, errlen, "%s: pool %d x %d peers exceeds %d QPs", path, c->pool, c->npeers, SWIFT_MAX_QPS);
		return -1;
	}
	if (c->qp_limit && c->pool * c->npeers > c->qp_limit) {
		snprintf(err, errlen, "%s: pool %d x %d peers exceeds the container's QP limit %d", path, c->pool,
			 c->npeers, c->qp_limit);
		return -1;
	}
	return 0;
}

/* Vendor ids the kernel drivers report (rdma_rxe, siw, mlx5_ib). */
#define VENDOR_RXE 0xffffffu
#define VENDOR_SIW 0x626d74u
#define VENDOR_MELLANOX 0x02c9u

/* swift_share_of decides from the device's vendor ids when they are known
 * (a soft device may have any name) and else from the provider name, the
 * device name without its trailing number (rxe0 → rxe, mlx5_1 → mlx5).
 * Mellanox parts from 4113 (ConnectX-4) on are mlx5; older ones are mlx4. */
enum swift_share swift_share_of(const char *provider, uint32_t vendor_id, uint32_t vendor_part)
{
	if (vendor_id == VENDOR_RXE || vendor_id == VENDOR_SIW)
		return SHARE_RELAY;
	if (vendor_id == VENDOR_MELLANOX)
		return vendor_part >= 4113 ? SHARE_BUFFERS : SHARE_NONE;
	if (!strcmp(provider, "rxe") || !strcmp(provider, "siw"))
		return SHARE_RELAY;
	if (!strcmp(provider, "mlx5"))
		return SHARE_BUFFERS;
	return SHARE_NONE;
}

/* swift_provider_name writes the device name without its trailing number
 * and the underscores before it. */
void swift_provider_name(const char *dev, char *out, size_t len)
{
	size_t n = strlen(dev);

	while (n > 0 && isdigit((unsigned char)dev[n - 1]))
		n--;
	while (n > 0 && dev[n - 1] == '_')
		n--;
	snprintf(out, len, "%.*s", (int)n, dev);
}

const char *swift_share_name(enum swift_share s)
{
	switch (s) {
	case SHARE_RELAY:
		return "doorbell-relay";
	case SHARE_BUFFERS:
		return "shared-buffers";
	default:
		return "none";
	}
}
