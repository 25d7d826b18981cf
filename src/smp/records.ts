/**
 * What the parts of an endpoint (endpoint.ts) agree on: the records they
 * put in the rings, the side path's messages and ports, and what an
 * endpoint knows of each peer's incarnation. Outgoing (outgoing.ts)
 * writes the records, Incoming (incoming.ts) reads them, PeerDeaths
 * (peer-deaths.ts) changes the PeerState both of them read.
 *
 * A record (framed by spsc-ring.ts, which owns KIND_PAD = 1) is a
 * three-word header, [byteLength << 4 | kind, callId, taskId or 0], then
 * its value (wire-codec.ts): a request's argument (after the task's name
 * when the task id is new on this pair), or an answer's result, thrown
 * value or unsendable-result error.
 */
import type { MessagePort } from "node:worker_threads";

export const KIND_REQUEST = 2;
/** A request whose task id is new on this pair: the task's name precedes the argument. */
export const KIND_REQUEST_NAMED = 3;
export const KIND_RESULT = 4;
export const KIND_THROWN = 5;
export const KIND_UNSENDABLE = 6;
/** Or'ed into a kind: the value is not in the ring, it is the next side-path message from this peer. */
export const SIDE = 8;
export const HEADER_BYTES = 12;

/** What an endpoint knows of a peer's incarnation: one object per peer, shared by its Outgoing and Incoming. */
export interface PeerState {
  /** The peer's EPOCH as this endpoint last saw it. */
  epoch: number;
  /** Taking calls: not down, not restarting. */
  up: boolean;
  /** Its thread died and no new one could start: calls to it reject. */
  gone: boolean;
}

/** A side-path message: a value holding shared memory, or an encoding too big for the ring. */
export type SideMessage = { readonly value: unknown } | { readonly bytes: ArrayBuffer };

/** Ports for the side path, made on first use (see side-links.ts). */
export interface SideLinks {
  /** A port whose messages arrive at incarnation `peerEpoch` of `peer`'s endpoint as side messages from this one. */
  portTo(peer: number, peerEpoch: number): MessagePort;
  /** Forget the port to `peer` (it went down). */
  drop(peer: number): void;
}
