# fault_proxy: a TCP proxy between a client and mastra-platform, for the
# specs of exec that survives a cut (spec/exec_resume_spec.lua). It runs
# the real server's traffic through loopback and breaks the exec
# WebSocket where a plan says: it cuts either direction at a chosen byte,
# cuts just before the server's exit frame, holds a socket half-open, or
# answers the upgrade itself with a close (1001, 1012, 1013) or a bare
# drop (1006) so that nothing reaches the server.
# spec/support/fault_proxy.lua drives it.
#
#   python3 fault_proxy.py [--watch-stdin] UPSTREAM_HOST:PORT PLAN_FILE
#
# It listens on 127.0.0.1 (a free port) and prints one line on stdout
#   {"url":"http://127.0.0.1:P","ws":"ws://127.0.0.1:P/ws/exec","pid":N}
# then one JSON line per event (below). SIGTERM, SIGINT or (with
# --watch-stdin) the end of stdin stop it (exit 0); bad arguments: a message and exit 2.
#
# HTTP connections are forwarded request by request. A response body that
# holds the upstream's "ws://HOST:PORT" gets the proxy's address instead
# (Content-Length fixed), so the exec lease's wsEndpoint leads back here.
#
# ---- the plan ----
# PLAN_FILE holds {"id":ANY,"ws":[ENTRY,...]}; it is read again at every
# WebSocket upgrade (write it elsewhere and rename it over). The k-th
# upgrade since the plan's id last changed follows ws[k]; once they are
# used up the last one repeats; no file or an empty list: pass. Bytes are
# counted from the end of each direction's HTTP header block (the
# WebSocket frames only).
# ENTRY (every key optional):
#   cut     "down" (server to client) or "up": with at = K, forward exactly
#           K bytes that way, then end the connection on both sides
#   at      the byte (default 0)
#   exit    true: end the connection just before the server's text frame
#           whose type is "exit" (none of it goes through)
#   hold    true: where the cut would be, stop forwarding both ways and
#           keep both sockets open (half-open) for holdMs (default: until
#           the proxy stops), then end them
#   reset   true: end with a TCP reset (SO_LINGER 0) rather than a FIN
#   refuse  1001, 1012 or 1013: answer the upgrade here (101 with the
#           first subprotocol offered), send a close frame with that code,
#           then end; 1006: answer 101 and end with no close frame. The
#           server sees nothing.
#
# ---- events (stdout, one JSON object a line; t: ms since the epoch) ----
#   {"event":"http","conn":N,"method":M,"path":P,"status":S,"t":T}
#   {"event":"ws","conn":N,"plan":ID,"entry":K,"t":T}       an upgrade
#   {"event":"cut","conn":N,"how":"cut"|"exit"|"hold"|"refuse","up":U,
#    "down":D,"t":T}                                        the fault struck
#   {"event":"wsEnd","conn":N,"up":U,"down":D,"t":T}        both sides over
import base64, hashlib, json, os, signal, socket, struct, sys, threading, time

WATCH_STDIN = len(sys.argv) > 1 and sys.argv[1] == "--watch-stdin"
if WATCH_STDIN:
    del sys.argv[1]
if len(sys.argv) != 3 or ":" not in sys.argv[1]:
    sys.stderr.write("usage: fault_proxy.py [--watch-stdin] UPSTREAM_HOST:PORT PLAN_FILE\n")
    sys.exit(2)
UP_HOST, UP_PORT = sys.argv[1].rsplit(":", 1)
UP_PORT = int(UP_PORT)
PLAN_FILE = sys.argv[2]
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

out_lock = threading.Lock()
state_lock = threading.Lock()
state = {"conn": 0, "plan": None, "used": 0}


def now_ms():
    return int(time.time() * 1000)


def emit(ev):
    ev["t"] = now_ms()
    with out_lock:
        sys.stdout.write(json.dumps(ev) + "\n")
        sys.stdout.flush()


def next_entry():
    try:
        with open(PLAN_FILE) as f:
            plan = json.load(f)
    except (OSError, ValueError):
        plan = {}
    entries = plan.get("ws") or []
    with state_lock:
        if plan.get("id") != state["plan"]:
            state["plan"], state["used"] = plan.get("id"), 0
        k = state["used"]
        state["used"] += 1
    if not entries:
        return plan.get("id"), k, {}
    return plan.get("id"), k, entries[min(k, len(entries) - 1)]


def read_head(sock, buf):
    """The header block (through CRLF CRLF) and what came after, or None."""
    while b"\r\n\r\n" not in buf:
        try:
            d = sock.recv(65536)
        except OSError:
            return None, buf
        if not d:
            return None, buf
        buf += d
    i = buf.index(b"\r\n\r\n") + 4
    return buf[:i], buf[i:]


def headers_of(head):
    lines = head.decode("latin-1").split("\r\n")
    hs = []
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            hs.append((k.strip().lower(), v.strip()))
    return lines[0], hs


def header(hs, name):
    for k, v in hs:
        if k == name:
            return v
    return None


def read_exact(sock, buf, n):
    while len(buf) < n:
        d = sock.recv(65536)
        if not d:
            raise EOFError
        buf += d
    return buf[:n], buf[n:]


def read_body(sock, buf, hs, is_response, method, status):
    """The body (de-chunked), the rest of buf, and whether it was chunked."""
    if is_response and (method == "HEAD" or status in (204, 304) or 100 <= status < 200):
        return b"", buf, False
    te = (header(hs, "transfer-encoding") or "").lower()
    if "chunked" in te:
        body = b""
        while True:
            while b"\r\n" not in buf:
                d = sock.recv(65536)
                if not d:
                    raise EOFError
                buf += d
            i = buf.index(b"\r\n")
            size = int(buf[:i].split(b";")[0], 16)
            buf = buf[i + 2:]
            if size == 0:
                # the trailer: an empty line, or header lines then one
                while len(buf) < 2 or (not buf.startswith(b"\r\n")
                                       and b"\r\n\r\n" not in buf):
                    d = sock.recv(65536)
                    if not d:
                        raise EOFError
                    buf += d
                if buf.startswith(b"\r\n"):
                    return body, buf[2:], True
                return body, buf[buf.index(b"\r\n\r\n") + 4:], True
            piece, buf = read_exact(sock, buf, size + 2)
            body += piece[:size]
    cl = header(hs, "content-length")
    if cl is not None:
        body, buf = read_exact(sock, buf, int(cl))
        return body, buf, False
    if is_response:
        while True:
            d = sock.recv(65536)
            if not d:
                return buf, b"", False
            buf += d
    return b"", buf, False


def end(sock, reset):
    try:
        if reset:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:
            sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


class Proxy:
    def __init__(self, listener):
        self.listener = listener
        self.addr = "127.0.0.1:%d" % listener.getsockname()[1]
        self.up_ws = ("ws://%s:%d" % (UP_HOST, UP_PORT)).encode()
        self.my_ws = ("ws://%s" % self.addr).encode()

    def serve(self):
        while True:
            c, _ = self.listener.accept()
            with state_lock:
                state["conn"] += 1
                n = state["conn"]
            threading.Thread(target=self.connection, args=(c, n), daemon=True).start()

    def connection(self, c, n):
        s = None
        try:
            buf = b""
            while True:
                head, buf = read_head(c, buf)
                if head is None:
                    return
                line, hs = headers_of(head)
                method, path = (line.split(" ") + ["", ""])[:2]
                if (header(hs, "upgrade") or "").lower() == "websocket":
                    self.websocket(c, n, head, hs, buf, s)
                    s = None
                    return
                body, buf, _ = read_body(c, buf, hs, False, method, 0)
                rhead = None
                for _ in range(2):
                    # a kept-alive upstream may have died (a server restart):
                    # once more on a new connection
                    fresh = s is None
                    if fresh:
                        s = socket.create_connection((UP_HOST, UP_PORT))
                    try:
                        s.sendall(self.rechunk(head, body))
                        rhead, rest = read_head(s, b"")
                    except OSError:
                        rhead = None
                    if rhead is not None or fresh:
                        break
                    end(s, False)
                    s = None
                if rhead is None:
                    return
                rline, rhs = headers_of(rhead)
                status = int(rline.split(" ")[1])
                rbody, rest, _ = read_body(s, rest, rhs, True, method, status)
                rbody = rbody.replace(self.up_ws, self.my_ws)
                c.sendall(self.rechunk(rhead, rbody, not (method == "HEAD" or status in
                                                          (204, 304))))
                emit({"event": "http", "conn": n, "method": method, "path": path,
                      "status": status})
                if (header(rhs, "connection") or "").lower() == "close":
                    return
        except (OSError, EOFError, ValueError):
            return
        finally:
            end(c, False)
            if s is not None:
                end(s, False)

    @staticmethod
    def rechunk(head, body, sized=True):
        """The header block with Content-Length for body (no chunking, no
        Expect: the whole body goes at once). sized False: a response
        that has no body (HEAD, 204, 304) keeps its headers."""
        if not sized:
            return head
        lines = head.decode("latin-1").split("\r\n")[:-2]
        kept = [lines[0]] + [l for l in lines[1:] if l.split(":", 1)[0].strip().lower()
                             not in ("content-length", "transfer-encoding", "expect")]
        kept.append("Content-Length: %d" % len(body))
        return ("\r\n".join(kept) + "\r\n\r\n").encode("latin-1") + body

    def websocket(self, c, n, head, hs, buf, old):
        if old is not None:
            end(old, False)
        plan, k, entry = next_entry()
        emit({"event": "ws", "conn": n, "plan": plan, "entry": k})
        refuse = entry.get("refuse")
        if refuse is not None:
            key = (header(hs, "sec-websocket-key") or "").encode()
            accept = base64.b64encode(hashlib.sha1(key + GUID).digest()).decode()
            proto = (header(hs, "sec-websocket-protocol") or "").split(",")[0].strip()
            answer = ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                      "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n" % accept)
            if proto:
                answer += "Sec-WebSocket-Protocol: %s\r\n" % proto
            emit({"event": "cut", "conn": n, "how": "refuse", "up": 0, "down": 0})
            c.sendall((answer + "\r\n").encode())
            if refuse != 1006:
                reason = b"refused by fault_proxy"
                payload = struct.pack(">H", refuse) + reason
                c.sendall(bytes([0x88, len(payload)]) + payload)
                # read what the client sends meanwhile (its init_exec, its
                # close): a close with unread bytes would be a reset
                c.settimeout(0.2)
                try:
                    while c.recv(65536):
                        pass
                except OSError:
                    pass
            end(c, refuse == 1006)
            emit({"event": "wsEnd", "conn": n, "up": 0, "down": 0})
            return
        try:
            s = socket.create_connection((UP_HOST, UP_PORT))
        except OSError:
            end(c, False)
            return
        Session(self, c, s, n, entry).run(head, buf)


class Session:
    """One proxied WebSocket: two pumps and the fault of its plan entry."""

    def __init__(self, proxy, c, s, n, entry):
        self.c, self.s, self.n, self.entry = c, s, n, entry
        self.count = {"up": 0, "down": 0}
        self.lock = threading.Lock()
        self.struck = False
        self.released = threading.Event()

    def strike(self, how, last=None):
        """The fault: nothing more goes either way (last: the bytes that
        still go down, after the others stop)."""
        with self.lock:
            if self.struck:
                return False
            self.struck = True
        if last:
            try:
                self.c.sendall(last)
            except OSError:
                pass
        emit({"event": "cut", "conn": self.n, "how": how, "up": self.count["up"],
              "down": self.count["down"]})
        if self.entry.get("hold"):
            ms = self.entry.get("holdMs")
            threading.Thread(target=self.release_after, args=(ms,), daemon=True).start()
        else:
            self.finish()
        return True

    def release_after(self, ms):
        if ms is None:
            return  # held until the proxy stops
        time.sleep(ms / 1000.0)
        self.finish()

    def finish(self):
        if self.released.is_set():
            return
        self.released.set()
        reset = bool(self.entry.get("reset"))
        end(self.c, reset)
        end(self.s, reset)

    def budget(self, way):
        if self.entry.get("cut") != way:
            return None
        return int(self.entry.get("at", 0))

    def send(self, way, dst, data):
        """Forward data one way within its budget; False once struck."""
        if self.struck:
            return False
        b = self.budget(way)
        if b is not None and self.count[way] + len(data) >= b:
            part = data[:b - self.count[way]]
            if part:
                dst.sendall(part)
                self.count[way] += len(part)
            self.strike("hold" if self.entry.get("hold") else "cut")
            return False
        dst.sendall(data)
        self.count[way] += len(data)
        return True

    def pump_up(self, buf):
        try:
            if buf and not self.send("up", self.s, buf):
                return
            while True:
                d = self.c.recv(65536)
                if not d or not self.send("up", self.s, d):
                    break
        except OSError:
            pass
        if not self.struck:
            self.finish()

    def pump_down(self):
        try:
            head, rest = read_head(self.s, b"")
            if head is None:
                return
            if self.budget("down") == 0 and head.startswith(b"HTTP/1.1 101"):
                # struck before the client can answer the 101: nothing of
                # its goes up
                self.strike("hold" if self.entry.get("hold") else "cut", head)
                return
            self.c.sendall(head)
            if not head.startswith(b"HTTP/1.1 101"):
                self.c.sendall(rest)
                while True:
                    d = self.s.recv(65536)
                    if not d:
                        break
                    self.c.sendall(d)
                return
            buf = rest
            while True:
                if self.entry.get("exit"):
                    # whole frames, so the exit frame can be told apart
                    while True:
                        f = whole_frame(buf)
                        if f is None:
                            break
                        frame, buf = buf[:f[0]], buf[f[0]:]
                        if f[1] == 1 and b'"exit"' in f[2][:64]:
                            self.strike("exit")
                            return
                        if not self.send("down", self.c, frame):
                            return
                elif buf:
                    if not self.send("down", self.c, buf):
                        return
                    buf = b""
                d = self.s.recv(65536)
                if not d:
                    break
                buf += d
        except OSError:
            pass
        finally:
            if not self.struck:
                self.finish()

    def run(self, head, buf):
        try:
            self.s.sendall(head)
        except OSError:
            self.finish()
            return
        up = threading.Thread(target=self.pump_up, args=(buf,), daemon=True)
        up.start()
        self.pump_down()
        up.join()
        if self.struck and self.entry.get("hold"):
            self.released.wait()
        emit({"event": "wsEnd", "conn": self.n, "up": self.count["up"],
              "down": self.count["down"]})


def whole_frame(buf):
    """(length, opcode, payload) of the first whole frame in buf, or None."""
    if len(buf) < 2:
        return None
    op, ln, i = buf[0] & 0x0F, buf[1] & 0x7F, 2
    if ln == 126:
        if len(buf) < 4:
            return None
        ln, i = struct.unpack(">H", buf[2:4])[0], 4
    elif ln == 127:
        if len(buf) < 10:
            return None
        ln, i = struct.unpack(">Q", buf[2:10])[0], 10
    if buf[1] & 0x80:
        i += 4
    if len(buf) < i + ln:
        return None
    return i + ln, op, buf[i:i + ln]


def main():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(256)
    proxy = Proxy(listener)
    signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
    signal.signal(signal.SIGINT, lambda *a: os._exit(0))
    with out_lock:
        sys.stdout.write(json.dumps({"url": "http://" + proxy.addr,
                                     "ws": "ws://%s/ws/exec" % proxy.addr,
                                     "pid": os.getpid()}) + "\n")
        sys.stdout.flush()
    threading.Thread(target=proxy.serve, daemon=True).start()
    if WATCH_STDIN:
        sys.stdin.read()
        os._exit(0)
    while True:
        signal.pause()


main()
