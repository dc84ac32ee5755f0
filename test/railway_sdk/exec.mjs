// Railway's TypeScript SDK (npm `railway`, the exec client that Mastra's
// direct exec mirrors) driving the local platform's exec WebSocket, for
// spec/railway_sdk_spec.lua. The SDK's data plane is real: its own
// WebSocket client (over the `ws` package: Node 20 has no global
// WebSocket) against mastra-platform's /ws/exec. Its control plane is
// Railway's GraphQL API, which the local platform does not serve: the
// SDK's `fetch` option answers its two operations here (the sandbox's
// record, and a shell token that is the exec lease's JWT the spec minted).
//
//   node exec.mjs SCENARIO   (env: MASTRA_RW_WS, MASTRA_RW_JWT, MASTRA_RW_SANDBOX,
//                             MASTRA_RW_ARG)
//
// Prints one JSON line: {"ok":true,"result":{...}} or
// {"ok":false,"error":{"name","message","closeCode"}}. Scenarios:
//   run       exec(MASTRA_RW_ARG): the result
//   attach    exec({sessionName: MASTRA_RW_ARG}): the full replay
//   lastRead  the same with resumeFromLastRead
//   kill      exec("sleep 30"), then kill("KILL") once it runs
//   detach    exec(MASTRA_RW_ARG), then detach(): the session name, or why not
import { Sandbox } from "railway";
import WebSocket from "ws";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`exec.mjs: ${name} is not set`);
  return v;
};
const ws = env("MASTRA_RW_WS");
const jwt = env("MASTRA_RW_JWT");
const sandboxId = env("MASTRA_RW_SANDBOX");
const arg = process.env.MASTRA_RW_ARG ?? "";

// the two GraphQL operations the exec path sends
async function fakeFetch(_url, init) {
  const body = JSON.parse(init.body);
  const op = /(query|mutation)\s+(\w+)/.exec(body.query)?.[2];
  let data;
  if (op === "RailwaySandbox") {
    data = { sandbox: { id: body.variables.id, status: "RUNNING", networkIsolation: "ISOLATED",
      environmentId: body.variables.environmentId, region: "local", idleTimeoutMinutes: null,
      createdAt: new Date(0).toISOString() } };
  } else if (op === "RailwayGenerateShellToken") {
    data = { generateShellToken: jwt };
  } else {
    return new Response(JSON.stringify({ errors: [{ message: `not served here: ${op}` }] }),
      { status: 400, headers: { "Content-Type": "application/json" } });
  }
  return new Response(JSON.stringify({ data }), { headers: { "Content-Type": "application/json" } });
}

const sandbox = await Sandbox.connect(sandboxId, {
  token: "local", environmentId: "env", fetch: fakeFetch,
  tcpProxyWsEndpoint: ws, webSocketImpl: WebSocket,
});

// exec(command), once its first output came: {h: its handle} (the handle
// itself is a thenable, which an async function's return would await)
async function started(command) {
  let seen;
  const first = new Promise((resolve) => { seen = resolve; });
  const h = sandbox.exec(command, { onStdout: () => seen() });
  await first;
  return { h };
}

const scenarios = {
  run: () => sandbox.exec(arg),
  attach: () => sandbox.exec({ sessionName: arg }),
  lastRead: () => sandbox.exec({ sessionName: arg }, { resumeFromLastRead: true }),
  kill: async () => {
    const { h } = await started("echo started; sleep 30");
    await h.kill("KILL");
    return await h;
  },
  detach: async () => {
    const { h } = await started(arg);
    const name = await h.detach().then((n) => ({ sessionName: n }),
      (e) => ({ detachError: e.message }));
    return { ...name, settled: await h };
  },
};

const scenario = scenarios[process.argv[2]];
if (!scenario) {
  console.error(`exec.mjs: unknown scenario '${process.argv[2]}'`);
  process.exit(2);
}
try {
  const result = await scenario();
  console.log(JSON.stringify({ ok: true, result }));
} catch (e) {
  console.log(JSON.stringify({ ok: false,
    error: { name: e.constructor?.name ?? "Error", message: e.message, closeCode: e.closeCode } }));
}
process.exit(0);
