/**
 * The short-lived child process that gives a shard's thread a listening
 * socket descriptor of its own (listen-socket.ts, relayHandle). Node has
 * no dup() and worker threads cannot receive handles, but a process can
 * receive one over its IPC channel from a child (SCM_RIGHTS: the kernel
 * installs a new descriptor in the receiver), in whichever thread spawned
 * that child. So the shard spawns this file, which either
 *   bind HOST FAMILY PORT   binds a new TCP socket (not listening: it
 *                           accepts nothing here), or
 *   dup                     takes the socket on its descriptor 3 (another
 *                           shard's, inherited at spawn),
 * and sends the handle back with its port; the child then exits, closing
 * its own copies. CommonJS and without dependencies: it starts with no
 * loader (the parent strips NODE_OPTIONS) in about 70 ms.
 *
 * process.binding("tcp_wrap") is Node's own TCP handle, as net.Server
 * makes it: no public API binds a socket without listening on it, or
 * wraps a descriptor without reading from it. Only this child touches it.
 */
interface TcpHandle {
  bind(address: string, port: number): number;
  bind6(address: string, port: number, flags: number): number;
  open(fd: number): number;
  getsockname(out: { port?: number }): number;
  close(): void;
}
type Binding = { TCP: new (type: number) => TcpHandle; constants: { SERVER: number } };

const send = process.send?.bind(process);
/** The answer, with the handle when there is one; the channel closes once it is sent. */
function reply(message: { rc: number; port?: number }, handle?: TcpHandle): void {
  if (send === undefined) process.exit(2);
  send(message, handle as never, () => process.disconnect());
}

const [mode, address = "", family = "4", port = "0"] = process.argv.slice(2);
const { TCP, constants } = (process as unknown as { binding(name: string): Binding }).binding("tcp_wrap");
const handle = new TCP(constants.SERVER);
let rc = mode === "dup" ? handle.open(3) : family === "6" ? handle.bind6(address, Number(port), 0) : handle.bind(address, Number(port));
const bound: { port?: number } = {};
// libuv reports a failed bind (EADDRINUSE) at the next call on the handle, not at bind.
if (rc === 0) rc = handle.getsockname(bound);
if (rc === 0 && typeof bound.port === "number") reply({ rc: 0, port: bound.port }, handle);
else {
  handle.close();
  reply({ rc: rc === 0 ? -22 : rc }); // EINVAL when it has no port
}
