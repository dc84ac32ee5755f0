# A raw WebSocket client for the exec socket of mastra-platform (for
# spec/exec_ws_frames_spec.lua): it sends frames that the ws-exec client
# (wslay) never would, and reports what the server answered.
#
#   python3 ws_raw_client.py WS_URL JWT SCENARIO
#
# Scenarios (each starts with the upgrade, subprotocol railway-shell):
#   fragments  init_exec of `echo hi` in three text frames, a ping "p1"
#              between the first two, then stdin_close
#   unmasked   an init_exec frame without a mask
#   badutf8    a text frame that is not UTF-8
#   toobig     init_exec of a command that writes its pid to toobig.pid,
#              prints "started" and sleeps; once "started" came, one
#              binary message of 1 MiB + 1 bytes (stdin's tag and 1048576)
#   close      the same command (close.pid), then close 4000 "bye"
#
# It reads until the server's close, answers it with a close of the same
# code (unless it closed first), then reads to the end of the connection,
# and prints one JSON line:
#   {"stdout": "...", "texts": [...], "pongs": [...], "close": CODE|null,
#    "reason": "...", "end": "fin"|"reset"|"eof"|"timeout"}
# (eof: the connection ended before any close frame came).
import base64, json, os, socket, struct, sys, urllib.parse

def frame(op, data, fin=True, mask=True):
    b0 = (0x80 if fin else 0) | op
    n = len(data)
    m = 0x80 if mask else 0
    if n < 126:
        head = struct.pack("!BB", b0, m | n)
    elif n < 65536:
        head = struct.pack("!BBH", b0, m | 126, n)
    else:
        head = struct.pack("!BBQ", b0, m | 127, n)
    if not mask:
        return head + data
    key = os.urandom(4)
    body = bytes(b ^ key[i % 4] for i, b in enumerate(data)) if n < 4096 else \
        (int.from_bytes(data, "big") ^ int.from_bytes((key * (n // 4 + 1))[:n], "big")).to_bytes(n, "big")
    return head + key + body

def init(command):
    return json.dumps({"type": "init_exec", "data": {"command": command}}).encode()

def recv_exact(s, n, buf):
    while len(buf) < n:
        chunk = s.recv(65536)
        if not chunk:
            raise EOFError
        buf += chunk
    return buf

def main():
    url, jwt, scenario = sys.argv[1], sys.argv[2], sys.argv[3]
    u = urllib.parse.urlparse(url)
    s = socket.create_connection((u.hostname, u.port), timeout=15)
    path = u.path + ("?" + u.query if u.query else "")
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\n"
               "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
               "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: railway-shell, %s\r\n\r\n"
               % (path, u.hostname, u.port, key, jwt)).encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(4096)
        if not chunk:
            print(json.dumps({"error": "no answer to the upgrade"}))
            return
        buf += chunk
    head, buf = buf.split(b"\r\n\r\n", 1)
    if b" 101 " not in head.split(b"\r\n")[0]:
        print(json.dumps({"error": head.decode(errors="replace")}))
        return

    out = {"stdout": "", "texts": [], "pongs": [], "close": None, "reason": "",
           "end": "timeout"}
    state = {"buf": buf}

    def next_frame():  # one frame of the server's, recorded in out
        b = recv_exact(s, 2, state["buf"])
        op, n = b[0] & 0x0f, b[1] & 0x7f
        at = 2
        if n == 126:
            b = recv_exact(s, 4, b)
            n, at = struct.unpack("!H", b[2:4])[0], 4
        elif n == 127:
            b = recv_exact(s, 10, b)
            n, at = struct.unpack("!Q", b[2:10])[0], 10
        b = recv_exact(s, at + n, b)
        data, state["buf"] = b[at:at + n], b[at + n:]
        if op == 1:
            out["texts"].append(json.loads(data))
        elif op == 2 and data[:1] == b"\x01":
            out["stdout"] += data[1:].decode(errors="replace")
        elif op == 10:
            out["pongs"].append(data.decode(errors="replace"))
        elif op == 8:
            if len(data) >= 2:
                out["close"] = struct.unpack("!H", data[:2])[0]
                out["reason"] = data[2:].decode(errors="replace")
            if not state.get("closed"):  # an answer, unless we closed first
                s.sendall(frame(8, data[:2]))
            return False
        return True

    def started(name):  # the command runs: it wrote its pid, then "started"
        s.sendall(frame(1, init("echo $$ > %s.pid; echo started; exec sleep 30" % name)))
        while "started\n" not in out["stdout"]:
            if not next_frame():
                raise EOFError

    try:
        if scenario == "fragments":
            msg = init("echo hi")
            s.sendall(frame(1, msg[:10], fin=False) + frame(9, b"p1")
                      + frame(0, msg[10:20], fin=False) + frame(0, msg[20:]))
            s.sendall(frame(1, b'{"type":"stdin_close"}'))
        elif scenario == "unmasked":
            s.sendall(frame(1, init("echo hi"), mask=False))
        elif scenario == "badutf8":
            s.sendall(frame(1, b'{"type":"\xc3\x28"}'))
        elif scenario == "toobig":
            started("toobig")
            s.sendall(frame(2, b"\x02" + b"x" * 1048576))
        elif scenario == "close":
            started("close")
            s.sendall(frame(8, struct.pack("!H", 4000) + b"bye"))
            state["closed"] = True
        else:
            print(json.dumps({"error": "unknown scenario " + scenario}))
            return
        while next_frame():
            pass
        while True:  # the server's end of the connection: FIN or RST
            if not s.recv(65536):
                out["end"] = "fin"
                break
    except EOFError:  # before the server's close: not a closing handshake
        out["end"] = "fin" if out["close"] is not None else "eof"
    except ConnectionResetError:
        out["end"] = "reset"
    except socket.timeout:
        pass
    print(json.dumps(out))

main()
