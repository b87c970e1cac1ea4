/**
 * A DNS server on 127.0.0.1 (UDP) answering A records for names the test sets, with TTL 0:
 * the stand-in for a Kubernetes headless Service, whose name resolves to one address per
 * ready pod. Replicas listen on distinct loopback addresses (127.0.0.2, 127.0.0.3, …) with
 * the same port, exactly as pods do; the gRPC clients reach it through a
 * `dns://127.0.0.1:<port>/<name>:<grpc port>` target.
 */
import { createSocket, type Socket } from 'node:dgram';
import * as packet from 'dns-packet';

export class TestDnsServer {
  readonly port: number;
  readonly #socket: Socket;
  readonly #records = new Map<string, string[]>();
  /** A queries answered, per name (tests read it to see re-resolution happen). */
  readonly queries = new Map<string, number>();

  private constructor(socket: Socket, port: number) {
    this.#socket = socket;
    this.port = port;
  }

  static async start(): Promise<TestDnsServer> {
    const socket = createSocket('udp4');
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(0, '127.0.0.1', () => resolve());
    });
    const server = new TestDnsServer(socket, socket.address().port);
    socket.on('message', (msg, rinfo) => server.#answer(msg, rinfo.port, rinfo.address));
    return server;
  }

  /** The addresses `name` resolves to from now on (empty: NXDOMAIN). */
  set(name: string, addresses: string[]): void {
    this.#records.set(name.toLowerCase(), [...addresses]);
  }

  #answer(msg: Buffer, port: number, address: string): void {
    let query: packet.Packet;
    try {
      query = packet.decode(msg);
    } catch {
      return;
    }
    const question = query.questions?.[0];
    if (!question) return;
    const name = question.name.toLowerCase();
    const addresses = this.#records.get(name) ?? [];
    const known = addresses.length > 0;
    if (question.type === 'A' && known) this.queries.set(name, (this.queries.get(name) ?? 0) + 1);
    const answers: packet.Answer[] =
      question.type === 'A'
        ? addresses.map((data) => ({ type: 'A', name: question.name, ttl: 0, data }))
        : [];
    const response = packet.encode({
      id: query.id,
      type: 'response',
      // RD copied, RA set; NXDOMAIN (rcode 3) for names this server does not know.
      flags: packet.RECURSION_DESIRED | packet.RECURSION_AVAILABLE | (known ? 0 : 3),
      questions: [question],
      answers,
    });
    this.#socket.send(response, port, address);
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.#socket.close(() => resolve()));
  }
}
