// The TypeScript SDK (@modelcontextprotocol/sdk) as an independent test client of the bridge.
//
//   node tests/ts_client.mjs URL CALLS
//
// URL is a Streamable HTTP endpoint; CALLS a JSON list of tool calls, made one after the other
// by one SDK Client over one StreamableHTTPClientTransport (one session, its connections kept
// alive by Node's fetch):
//
//   [{"tool": "echo", "arguments": {"text": "hi"}, "fill": {"text": 5000000}}, ...]
//
// "fill" (optional) sets each named argument to a string of that many "x" (a large argument
// would not fit on a command line). Prints one JSON line per call, in order:
//
//   {"call": 0, "result": {...the CallToolResult...}}
//   {"call": 1, "error": {"name": "...", "code": 413, "message": "...", "data": ...}}
//
// then closes the client (DELETE) and exits 0; exits 2 on bad arguments or when the client cannot
// connect. Installed by tests/conformance/install.sh under tests/conformance/.node/sdk.

import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const sdkRoot = path.join(here, "conformance", ".node", "sdk", "node_modules", "@modelcontextprotocol", "sdk");
const require = createRequire(path.join(sdkRoot, "package.json"));
const { Client } = await import(require.resolve("@modelcontextprotocol/sdk/client/index.js"));
const { StreamableHTTPClientTransport } = await import(
    require.resolve("@modelcontextprotocol/sdk/client/streamableHttp.js")
);

function describe(error) {
    return {
        name: error?.name ?? typeof error,
        code: error?.code ?? null,
        message: String(error?.message ?? error),
        data: error?.data ?? null,
    };
}

const [url, callsText] = process.argv.slice(2);
if (!url || !callsText) {
    console.error("usage: ts_client.mjs URL CALLS_JSON");
    process.exit(2);
}
const calls = JSON.parse(callsText);
const client = new Client({ name: "mcp-bridge-ts-test-client", version: "1.0.0" });
try {
    await client.connect(new StreamableHTTPClientTransport(new URL(url)));
} catch (error) {
    console.log(JSON.stringify({ connect: describe(error) }));
    process.exit(2);
}
for (const [index, call] of calls.entries()) {
    const args = { ...(call.arguments ?? {}) };
    for (const [name, size] of Object.entries(call.fill ?? {})) {
        args[name] = "x".repeat(size);
    }
    try {
        const result = await client.callTool({ name: call.tool, arguments: args });
        console.log(JSON.stringify({ call: index, result }));
    } catch (error) {
        console.log(JSON.stringify({ call: index, error: describe(error) }));
    }
}
await client.close();
