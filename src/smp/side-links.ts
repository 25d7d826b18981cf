/**
 * The side path's ports (outgoing.ts): a value holding shared memory, or
 * one too big for a ring, travels by postMessage on a MessagePort between
 * the two threads, while a SIDE record in the ring keeps its place in
 * order. Ports are made on first use, one per ordered pair of
 * incarnations that needs one: the sender makes a MessageChannel, keeps
 * one end, and sends the other to the receiver through the main thread,
 * which every shard has a control port to (given with its "init"
 * request). The main thread sends its own straight down the control port.
 * Messages posted before the port arrives wait in it; the receiver's ring
 * waits for them.
 *
 * Control messages (shard <-> main thread):
 *   { kind: "connect", from, to, epoch, toEpoch, port }  shard -> main: forward `port` to `to`
 *   { kind: "connect", from, epoch, toEpoch, port }      main -> shard: a port from `from`
 * `epoch` is the sender's incarnation: a port from a shard that has since
 * died is refused (closed) on arrival. `toEpoch` is the receiver's
 * incarnation the sender wrote its SIDE records for: the port goes to
 * that incarnation's control port and no other. Before it did, a port
 * made while its receiver was down (dead, its new thread not yet started)
 * went down the dead thread's control port, so the new thread got the
 * SIDE record and never its message, and its ring from that sender
 * waited for it for ever (every later call too). The main thread now
 * holds such a port until the control port of that incarnation opens,
 * and closes one meant for an incarnation that has already died (its
 * sender forgets those calls and rejects them).
 */
import { MessageChannel, type MessagePort } from "node:worker_threads";
import type { Endpoint } from "./endpoint.js";
import type { SideLinks } from "./records.js";

export interface ConnectMessage {
  readonly kind: "connect";
  readonly from: number;
  readonly to?: number;
  readonly epoch: number;
  readonly toEpoch: number;
  readonly port: MessagePort;
}

/** Ports this endpoint sends on, made on first use, each for one incarnation of its peer. */
abstract class PortsByPeer implements SideLinks {
  private readonly ports = new Map<number, { readonly port: MessagePort; readonly epoch: number }>();

  portTo(peer: number, peerEpoch: number): MessagePort {
    const known = this.ports.get(peer);
    if (known !== undefined && known.epoch === peerEpoch) return known.port;
    known?.port.close();
    const channel = new MessageChannel();
    this.introduce(peer, peerEpoch, channel.port2);
    const port = channel.port1;
    port.unref();
    this.ports.set(peer, { port, epoch: peerEpoch });
    return port;
  }

  drop(peer: number): void {
    this.ports.get(peer)?.port.close();
    this.ports.delete(peer);
  }

  closeAll(): void {
    for (const { port } of this.ports.values()) port.close();
    this.ports.clear();
  }

  /** Get `port` to incarnation `peerEpoch` of `peer`'s endpoint as this endpoint's side port. */
  protected abstract introduce(peer: number, peerEpoch: number, port: MessagePort): void;
}

/** A shard's side links: introductions go through its control port to the main thread. */
export class ShardSideLinks extends PortsByPeer {
  constructor(
    private readonly control: MessagePort,
    private readonly self: number,
    private readonly epoch: number,
  ) {
    super();
  }

  /** Accept the ports the main thread hands over for `endpoint`. */
  listen(endpoint: Endpoint): void {
    this.control.on("message", (m: ConnectMessage) => {
      if (m.kind === "connect") endpoint.acceptSidePort(m.from, m.epoch, m.toEpoch, m.port);
    });
    this.control.unref();
  }

  protected introduce(peer: number, peerEpoch: number, port: MessagePort): void {
    const message: ConnectMessage = { kind: "connect", from: this.self, to: peer, epoch: this.epoch, toEpoch: peerEpoch, port };
    this.control.postMessage(message, [port]);
  }
}

/** The main thread's side links: it holds every shard's control port and forwards introductions. */
export class MainSideLinks extends PortsByPeer {
  private readonly controls: Array<{ readonly port: MessagePort; readonly epoch: number } | undefined> = [];
  /** Introductions for an incarnation whose control port is not open yet (its thread is starting). */
  private held: ConnectMessage[][] = [];
  private closed = false;
  private endpoint: Endpoint | undefined;

  constructor(private readonly self: number) {
    super();
  }

  attach(endpoint: Endpoint): void {
    this.endpoint = endpoint;
  }

  /**
   * A fresh control channel for incarnation `epoch` of `shard` (at start
   * and when it restarts); returns the shard's end. Introductions held for
   * that incarnation go down it; older ones are closed.
   */
  openControl(shard: number, epoch: number): MessagePort {
    this.controls[shard]?.port.close();
    const channel = new MessageChannel();
    const mine = channel.port1;
    mine.on("message", (m: ConnectMessage) => this.forward(shard, m));
    mine.unref();
    this.controls[shard] = { port: mine, epoch };
    const held = this.held[shard] ?? [];
    this.held[shard] = [];
    for (const m of held) this.deliver(shard, m);
    return channel.port2;
  }

  closeControls(): void {
    for (const control of this.controls) control?.port.close();
    this.controls.length = 0;
    for (const held of this.held) for (const m of held ?? []) m.port.close();
    this.held = [];
    this.closed = true;
    this.closeAll();
  }

  protected introduce(peer: number, peerEpoch: number, port: MessagePort): void {
    this.deliver(peer, { kind: "connect", from: this.self, epoch: 0, toEpoch: peerEpoch, port });
  }

  private forward(shard: number, m: ConnectMessage): void {
    if (m.kind !== "connect" || m.from !== shard) return;
    if (m.to === this.self) {
      this.endpoint?.acceptSidePort(m.from, m.epoch, m.toEpoch, m.port);
      return;
    }
    if (m.to === undefined || !Number.isInteger(m.to) || m.to < 0 || m.to >= this.self) {
      m.port.close();
      return;
    }
    this.deliver(m.to, { kind: "connect", from: m.from, epoch: m.epoch, toEpoch: m.toEpoch, port: m.port });
  }

  /** Down the control port of incarnation m.toEpoch of `shard`: now, once it opens, or never (it died). */
  private deliver(shard: number, m: ConnectMessage): void {
    const control = this.controls[shard];
    if (this.closed) {
      m.port.close();
    } else if (control !== undefined && control.epoch === m.toEpoch) {
      control.port.postMessage(m, [m.port]);
    } else if (control === undefined || control.epoch < m.toEpoch) {
      (this.held[shard] ??= []).push(m);
    } else {
      m.port.close();
    }
  }
}
