# A WebSocket server that sends what mastra-platform never does (for
# spec/ws_fragments_spec.lua): messages split into continuation frames,
# a ping between two fragments, empty messages, and a fragmented message
# larger than the client's maxMessage. It listens on 127.0.0.1 (a free
# port, printed on stdout), serves one connection per scenario, in order:
#   "frag": "hel" + ping + "lo " + "world" (text), 80,000 bytes (binary),
#           an empty binary message in two frames, an empty text message,
#           then close 1000 "bye"
#   "big":  a binary message of 600 + 600 bytes in two frames
# and exits. Usage: python3 ws_fragments.py
import base64, hashlib, socket, struct, sys, time

def frame(op, data, fin=True):
    b0 = (0x80 if fin else 0) | op
    n = len(data)
    if n < 126:
        head = struct.pack("!BB", b0, n)
    elif n < 65536:
        head = struct.pack("!BBH", b0, 126, n)
    else:
        head = struct.pack("!BBQ", b0, 127, n)
    return head + data

def main():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(4)
    s.settimeout(60)
    print(s.getsockname()[1], flush=True)
    for mode in ("frag", "big"):
        c, _ = s.accept()
        c.settimeout(10)
        req = b""
        while b"\r\n\r\n" not in req:
            chunk = c.recv(4096)
            if not chunk:
                break
            req += chunk
        key = [l.split(b":", 1)[1].strip() for l in req.split(b"\r\n")
               if l.lower().startswith(b"sec-websocket-key:")][0]
        accept = base64.b64encode(hashlib.sha1(
            key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
        c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                  b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n")
        if mode == "frag":
            c.sendall(frame(1, b"hel", fin=False) + frame(9, b"p")
                      + frame(0, b"lo ", fin=False) + frame(0, b"world"))
            c.sendall(frame(2, b"\x00\x01" * 40000))
            c.sendall(frame(2, b"", fin=False) + frame(0, b""))
            c.sendall(frame(1, b""))
            c.sendall(frame(8, struct.pack("!H", 1000) + b"bye"))
        else:
            c.sendall(frame(2, b"a" * 600, fin=False) + frame(0, b"b" * 600))
        time.sleep(0.3)  # the client's answer (a pong, its close) comes in
        try:
            c.recv(65536)
        except OSError:
            pass
        c.close()

main()
