// A real OAuth 2.0 authorization server for the OAuth tests: oidc-provider (panva's certified
// OpenID Connect server), driven by tests/oidc.py. Installed by tests/conformance/install.sh under
// tests/conformance/.node/oidc.
//
//   node tests/oidc_provider.mjs --jwks FILE --clients FILE [--port N] [--path /p] [--ttl S] [--no-rfc8414]
//
// Serves on 127.0.0.1:N (0: any free port) with issuer http://127.0.0.1:<port><path>, and prints
// `READY <port>` on stdout once it accepts connections.
//
//   --jwks FILE     a private JWK set ({"keys": [...]}); the first key signs the JWT access tokens
//                   (tests/oidc.py makes the keys, so that tests can sign crafted tokens with them).
//   --clients FILE  a JSON list of clients: {"client_id", "client_secret", "access_token_format"},
//                   each allowed the client_credentials grant with client_secret_basic, and
//                   introspection and revocation. access_token_format "jwt" or "opaque" is the
//                   format of the tokens the client gets for any resource (RFC 8707 indicator).
//   --ttl S         lifetime of access tokens, seconds.
//   --path /p       the issuer's path. RFC 8414 metadata is then at /.well-known/oauth-authorization-server/p
//                   (the suffix before the path) and nowhere else; OpenID's at /p/.well-known/openid-configuration.
//   --no-rfc8414    serve only /.well-known/openid-configuration, not the RFC 8414 document (a
//                   verifier must fall back to the OpenID one).
//
// A token request names one resource (the audience of the token) and the scopes it wants; every
// scope asked for is granted (the resource server info below lists exactly those), so each test
// picks its own. Commands on stdin, one a line, each answered with one line:
//
//   keys   re-read the JWKS file and serve with it (key rotation): `KEYS <kid> <kid>...`.
//          Tokens issued before stay valid (opaque ones are in a store shared by the providers).
//   stop   close the listening socket and every connection (an issuer that is down): `STOPPED`.
//   start  listen again on the same port: `READY <port>`.
//
// End of stdin ends the process. Errors go to stderr; a command that fails answers `ERROR <text>`.

import { readFileSync } from "node:fs";
import http from "node:http";
import { createRequire } from "node:module";
import path from "node:path";
import readline from "node:readline";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.join(here, "conformance", ".node", "oidc", "node_modules", "oidc-provider");
const require = createRequire(path.join(root, "package.json"));
const { default: Provider } = await import(require.resolve("oidc-provider"));

const { values: args } = parseArgs({
    options: {
        jwks: { type: "string" },
        clients: { type: "string" },
        port: { type: "string", default: "0" },
        path: { type: "string", default: "" },
        ttl: { type: "string", default: "600" },
        "no-rfc8414": { type: "boolean", default: false },
    },
});
if (!args.jwks || !args.clients) {
    process.stderr.write("usage: oidc_provider.mjs --jwks FILE --clients FILE [--port N] [--path /p] [--ttl S]\n");
    process.exit(2);
}
const mount = args.path.replace(/\/$/, "");
const ttl = Number(args.ttl);
const clients = JSON.parse(readFileSync(args.clients, "utf8"));
const formats = new Map(clients.map((client) => [client.client_id, client.access_token_format ?? "jwt"]));

// oidc-provider's storage interface over one Map for the whole process. The provider is rebuilt on
// `keys` (it reads its keys once) and its own memory adapter has a store per provider: this one
// lets opaque tokens outlive a rotation. Only what client credentials, introspection and
// revocation use is here (no grants, sessions or user codes).
const store = new Map();
class SharedAdapter {
    constructor(model) {
        this.model = model;
    }

    async upsert(id, payload, expiresIn) {
        const expiresAt = expiresIn ? Date.now() + expiresIn * 1000 : Infinity;
        store.set(`${this.model}:${id}`, { payload, expiresAt });
    }

    async find(id) {
        const entry = store.get(`${this.model}:${id}`);
        return entry && entry.expiresAt > Date.now() ? entry.payload : undefined;
    }

    async destroy(id) {
        store.delete(`${this.model}:${id}`);
    }

    async consume(id) {
        const entry = store.get(`${this.model}:${id}`);
        if (entry) entry.payload.consumed = Math.floor(Date.now() / 1000);
    }

    async findByUid() {}

    async findByUserCode() {}

    async revokeByGrantId() {}
}

function makeProvider(port, jwks) {
    const alg = jwks.keys[0].alg;
    const provider = new Provider(`http://127.0.0.1:${port}${mount}`, {
        adapter: SharedAdapter,
        jwks,
        clients: clients.map((client) => ({
            client_id: client.client_id,
            client_secret: client.client_secret,
            grant_types: ["client_credentials"],
            response_types: [],
            redirect_uris: [],
            token_endpoint_auth_method: "client_secret_basic",
        })),
        clientDefaults: { id_token_signed_response_alg: alg },
        cookies: { keys: ["oidc-provider test fixture"] }, // no browser flows here
        ttl: { ClientCredentials: ttl },
        features: {
            devInteractions: { enabled: false },
            clientCredentials: { enabled: true },
            introspection: {
                enabled: true,
                allowedPolicy: () => true, // every client here is confidential
            },
            revocation: {
                enabled: true,
                allowedPolicy: () => true,
            },
            resourceIndicators: {
                enabled: true,
                defaultResource: () => undefined,
                useGrantedResource: () => true,
                getResourceServerInfo: (ctx, resource, client) => ({
                    scope: ctx.oidc.params.scope ?? "",
                    audience: resource,
                    accessTokenTTL: ttl,
                    accessTokenFormat: formats.get(client.clientId) ?? "jwt",
                    jwt: { sign: { alg } },
                }),
            },
        },
    });
    provider.on("server_error", (ctx, error) => process.stderr.write(`server_error: ${error.stack}\n`));
    return provider;
}

function readKeys() {
    return JSON.parse(readFileSync(args.jwks, "utf8"));
}

let port = Number(args.port);
let provider;
let handler;
const sockets = new Set();

const server = http.createServer((req, res) => {
    // RFC 8414 §3: the well-known suffix goes *before* the issuer's path. oidc-provider serves
    // /.well-known/oauth-authorization-server under its mount (after the path, the OpenID way):
    // with a path, that place answers 404 here, so a client that appends is caught.
    const wellKnown = `/.well-known/oauth-authorization-server${mount}`;
    const [pathname, query] = req.url.split(/\?(.*)/s, 2);
    const rfc8414 = pathname === wellKnown;
    const appended = !rfc8414 && pathname.endsWith("/.well-known/oauth-authorization-server");
    if (appended || (rfc8414 && args["no-rfc8414"])) {
        res.writeHead(404).end();
        return;
    }
    if (rfc8414) {
        req.url = `/.well-known/oauth-authorization-server${query ? `?${query}` : ""}`;
        req.originalUrl = `${mount}${req.url}`;
    } else if (mount && (pathname === mount || pathname.startsWith(`${mount}/`))) {
        // mounted under the issuer's path, as express would: oidc-provider reads originalUrl
        req.originalUrl = req.url;
        req.url = req.url.slice(mount.length) || "/";
    } else if (mount) {
        res.writeHead(404).end();
        return;
    }
    handler(req, res);
});
server.keepAliveTimeout = 5000;
server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
});

function listen() {
    return new Promise((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, "127.0.0.1", () => {
            server.off("error", reject);
            resolve(server.address().port);
        });
    });
}

function install(jwks) {
    provider = makeProvider(port, jwks);
    handler = provider.callback();
}

// Port 0 is only known after listen: the first provider is built once the socket is bound
// (requests cannot arrive before READY is printed and the test reads it).
handler = (req, res) => res.writeHead(503).end();
port = await listen();
install(readKeys());
process.stdout.write(`READY ${port}\n`);

const commands = {
    keys: async () => {
        const jwks = readKeys();
        install(jwks);
        return `KEYS ${jwks.keys.map((key) => key.kid).join(" ")}`;
    },
    stop: async () => {
        const closed = new Promise((resolve) => server.close(resolve));
        for (const socket of sockets) socket.destroy();
        await closed;
        return "STOPPED";
    },
    start: async () => `READY ${await listen()}`,
};

const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
    const command = commands[line.trim()];
    let reply;
    try {
        reply = command ? await command() : `ERROR unknown command ${JSON.stringify(line)}`;
    } catch (error) {
        process.stderr.write(`${error.stack}\n`);
        reply = `ERROR ${String(error.message ?? error).replace(/\n/g, " ")}`;
    }
    process.stdout.write(`${reply}\n`);
}
process.exit(0);
