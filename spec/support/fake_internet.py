# The fake internet of spec/egress_spec.lua: run inside a network namespace
# that the spec made (never anywhere else). It serves, on every address of
# that namespace:
#   HTTP on 80 and 8080: "fake-internet <Host header> <path>"
#   HTTPS on 443 with the certificate and key given (names *.test)
#   DNS on UDP 53: NAME.test -> the address given (A records), else NXDOMAIN
#   UDP echo on 7: each datagram back, prefixed with "echo "
# Usage: python3 fake_internet.py ADDRESS CERT KEY
# It stops when its stdin closes (the spec's process ends) or on SIGTERM.
import http.server, socket, socketserver, ssl, struct, sys, threading, os, signal

ADDR, CERT, KEY = sys.argv[1], sys.argv[2], sys.argv[3]

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("fake-internet %s %s\n" % (self.headers.get("Host"), self.path)).encode()
        if self.path.startswith("/big"):
            body = b"x" * (int(self.path[4:] or "1048576"))
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass

class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 512

def serve(port, tls):
    s = Server(("0.0.0.0", port), Handler)
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(CERT, KEY)
        s.socket = ctx.wrap_socket(s.socket, server_side=True)
    threading.Thread(target=s.serve_forever, daemon=True).start()

def dns():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(("0.0.0.0", 53))
    a = socket.inet_aton(ADDR)
    while True:
        q, peer = u.recvfrom(4096)
        if len(q) < 12:
            continue
        i, labels = 12, []
        while i < len(q) and q[i]:
            labels.append(q[i + 1:i + 1 + q[i]].decode(errors="replace"))
            i += 1 + q[i]
        qtype = struct.unpack(">H", q[i + 1:i + 3])[0]
        question = q[12:i + 5]
        name = ".".join(labels).lower()
        ok = name.endswith(".test")
        flags = 0x8180 if ok else 0x8183
        an = 1 if ok and qtype == 1 else 0
        r = q[:2] + struct.pack(">HHHHH", flags, 1, an, 0, 0) + question
        if an:
            r += b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + a
        u.sendto(r, peer)

def echo():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(("0.0.0.0", 7))
    while True:
        d, peer = u.recvfrom(4096)
        u.sendto(b"echo " + d, peer)

serve(80, False)
threading.Thread(target=echo, daemon=True).start()
serve(8080, False)
serve(443, True)
threading.Thread(target=dns, daemon=True).start()
signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
print("ready", flush=True)
try:
    sys.stdin.read()
finally:
    os._exit(0)
