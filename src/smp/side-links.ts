/**
 * The side path's ports (endpoint.ts): a value holding shared memory, or
 * one too big for a ring, travels by postMessage on a MessagePort between
 * the two threads, while a SIDE record in the ring keeps its place in
 * order. Ports are made on first use, one per ordered pair that needs
 * one: the sender makes a MessageChannel, keeps one end, and sends the
 * other to the receiver through the main thread, which every shard has a
 * control port to (given with its "init" request). The main thread sends
 * its own straight down the control port. Messages posted before the port
 * arrives wait in it; the receiver's ring waits for them.
 *
 * Control messages (shard <-> main thread):
 *   { kind: "connect", from, to, epoch, port }   shard -> main: forward `port` to `to`
 *   { kind: "connect", from, epoch, port }        main -> shard: a port from `from`
 * `epoch` is the sender's incarnation: a port from a shard that has since
 * died is refused (closed) on arrival.
 */
import { MessageChannel, type MessagePort } from "node:worker_threads";
import type { Endpoint, SideLinks } from "./endpoint.js";

export interface ConnectMessage {
  readonly kind: "connect";
  readonly from: number;
  readonly to?: number;
  readonly epoch: number;
  readonly port: MessagePort;
}

/** Ports this endpoint sends on, made on first use. */
abstract class PortsByPeer implements SideLinks {
  private readonly ports = new Map<number, MessagePort>();

  portTo(peer: number): MessagePort {
    let port = this.ports.get(peer);
    if (port === undefined) {
      const channel = new MessageChannel();
      this.introduce(peer, channel.port2);
      port = channel.port1;
      port.unref();
      this.ports.set(peer, port);
    }
    return port;
  }

  drop(peer: number): void {
    this.ports.get(peer)?.close();
    this.ports.delete(peer);
  }

  closeAll(): void {
    for (const port of this.ports.values()) port.close();
    this.ports.clear();
  }

  /** Get `port` to `peer`'s endpoint as this endpoint's side port. */
  protected abstract introduce(peer: number, port: MessagePort): void;
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
      if (m.kind === "connect") endpoint.acceptSidePort(m.from, m.epoch, m.port);
    });
    this.control.unref();
  }

  protected introduce(peer: number, port: MessagePort): void {
    const message: ConnectMessage = { kind: "connect", from: this.self, to: peer, epoch: this.epoch, port };
    this.control.postMessage(message, [port]);
  }
}

/** The main thread's side links: it holds every shard's control port and forwards introductions. */
export class MainSideLinks extends PortsByPeer {
  private readonly controls: Array<MessagePort | undefined> = [];
  private endpoint: Endpoint | undefined;

  constructor(private readonly self: number) {
    super();
  }

  attach(endpoint: Endpoint): void {
    this.endpoint = endpoint;
  }

  /** A fresh control channel for `shard` (at start and when it restarts); returns the shard's end. */
  openControl(shard: number): MessagePort {
    this.controls[shard]?.close();
    const channel = new MessageChannel();
    const mine = channel.port1;
    mine.on("message", (m: ConnectMessage) => this.forward(shard, m));
    mine.unref();
    this.controls[shard] = mine;
    return channel.port2;
  }

  closeControls(): void {
    for (const port of this.controls) port?.close();
    this.controls.length = 0;
    this.closeAll();
  }

  protected introduce(peer: number, port: MessagePort): void {
    const control = this.controls[peer];
    if (control === undefined) {
      port.close();
      return;
    }
    const message: ConnectMessage = { kind: "connect", from: this.self, epoch: 0, port };
    control.postMessage(message, [port]);
  }

  private forward(shard: number, m: ConnectMessage): void {
    if (m.kind !== "connect" || m.from !== shard) return;
    if (m.to === this.self) {
      this.endpoint?.acceptSidePort(m.from, m.epoch, m.port);
      return;
    }
    const control = m.to === undefined ? undefined : this.controls[m.to];
    if (control === undefined) {
      m.port.close();
      return;
    }
    const message: ConnectMessage = { kind: "connect", from: m.from, epoch: m.epoch, port: m.port };
    control.postMessage(message, [m.port]);
  }
}
