/* sniff: the VM sniff scenario's attacker, a host-network process with
 * CAP_NET_RAW that reads what passes on every interface (lo included) for
 * a while. It prints, one line per packet:
 *
 *   tcp SPORT DPORT HEX      the payload of a TCP segment to or from a port
 *                            in [LO, HI] (the zygotes' exchange)
 *   bth DQPN PSN             the destination QP and PSN of a RoCEv2 packet
 *                            (UDP 4791), read from its base transport header
 *
 * Usage: sniff SECONDS LO HI
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_arp.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ROCE_PORT 4791

static long long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* packet handles one IPv4 packet of n bytes. */
static void packet(const unsigned char *p, size_t n, unsigned lo, unsigned hi)
{
	const struct iphdr *ip = (const void *)p;
	size_t ihl, i;

	if (n < sizeof(*ip) || ip->version != 4)
		return;
	ihl = (size_t)ip->ihl * 4;
	if (ihl < sizeof(*ip) || ntohs(ip->tot_len) < ihl || ntohs(ip->tot_len) > n)
		return;
	n = ntohs(ip->tot_len);
	if (ip->protocol == IPPROTO_TCP && n >= ihl + sizeof(struct tcphdr)) {
		const struct tcphdr *t = (const void *)(p + ihl);
		unsigned sp = ntohs(t->source), dp = ntohs(t->dest);
		size_t off = ihl + (size_t)t->doff * 4;

		if (off >= n || !((sp >= lo && sp <= hi) || (dp >= lo && dp <= hi)))
			return;
		printf("tcp %u %u ", sp, dp);
		for (i = off; i < n; i++)
			printf("%02x", p[i]);
		printf("\n");
	} else if (ip->protocol == IPPROTO_UDP && n >= ihl + sizeof(struct udphdr) + 12) {
		const struct udphdr *u = (const void *)(p + ihl);
		const unsigned char *bth = p + ihl + sizeof(*u);

		if (ntohs(u->dest) != ROCE_PORT)
			return;
		/* BTH: opcode, flags, pkey(2), reserved(1), dest QP(3), ack/reserved(1), PSN(3) */
		printf("bth %u %u\n", (unsigned)bth[5] << 16 | (unsigned)bth[6] << 8 | bth[7],
		       (unsigned)bth[9] << 16 | (unsigned)bth[10] << 8 | bth[11]);
	}
}

int main(int argc, char **argv)
{
	unsigned char buf[65536];
	long long end;
	unsigned lo, hi;
	int fd;

	if (argc != 4) {
		fprintf(stderr, "usage: sniff SECONDS LO HI\n");
		return 2;
	}
	end = now_ms() + atoll(argv[1]) * 1000;
	lo = (unsigned)atoi(argv[2]);
	hi = (unsigned)atoi(argv[3]);
	/* cooked packets of every interface, both ways (a socket bound to one
	 * protocol sees no outgoing packets): the payload starts at the
	 * network header */
	fd = socket(AF_PACKET, SOCK_DGRAM, htons(ETH_P_ALL));
	if (fd < 0) {
		fprintf(stderr, "sniff: socket(AF_PACKET): %s\n", strerror(errno));
		return 1;
	}
	printf("sniffing\n");
	fflush(stdout);
	while (now_ms() < end) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		struct sockaddr_ll from;
		socklen_t fl = sizeof(from);
		ssize_t n;

		if (poll(&pf, 1, 200) <= 0)
			continue;
		n = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
		if (n <= 0)
			continue;
		/* a packet on lo is seen once leaving and once arriving */
		if (from.sll_protocol != htons(ETH_P_IP) ||
		    (from.sll_pkttype == PACKET_OUTGOING && from.sll_hatype == ARPHRD_LOOPBACK))
			continue;
		packet(buf, (size_t)n, lo, hi);
		fflush(stdout);
	}
	return 0;
}
