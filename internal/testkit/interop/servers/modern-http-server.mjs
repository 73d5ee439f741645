// The 2026-07-28 server of modern-server.mjs over Streamable HTTP: the
// TypeScript SDK v2's createMcpHandler behind node:http, on 127.0.0.1 at
// $PORT, path /mcp. Run with `node modern-http-server.mjs reject` (modern
// only) or `... serve` (the SDK's default: 2025-era requests are served
// statelessly beside the modern ones).
import http from 'node:http';
import { Readable } from 'node:stream';
import { McpServer, fromJsonSchema, createMcpHandler } from '@modelcontextprotocol/server';
import { register } from './tools.mjs';

const options = process.argv[2] === 'reject' ? { legacy: 'reject' } : {};
const port = Number(process.env.PORT);

const handler = createMcpHandler(() => {
    const server = new McpServer({ name: 'capbridge-interop-modern-http', version: '2.4.0' }, { capabilities: { tools: { listChanged: true } } });
    register(server, fromJsonSchema, (ctx) => ({
        token: ctx.mcpReq._meta?.progressToken,
        signal: ctx.mcpReq.signal,
        notify: (n) => ctx.mcpReq.notify(n),
    }));
    return server;
}, options);

http.createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const abort = new AbortController();
    res.on('close', () => abort.abort());
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) {
        for (const one of [].concat(v)) headers.append(k, one);
    }
    const hasBody = req.method !== 'GET' && req.method !== 'HEAD' && chunks.length > 0;
    const request = new Request(`http://127.0.0.1:${port}${req.url}`, {
        method: req.method, headers, body: hasBody ? Buffer.concat(chunks) : undefined, signal: abort.signal,
    });
    try {
        const response = await handler.fetch(request);
        res.writeHead(response.status, Object.fromEntries(response.headers));
        if (response.body) {
            Readable.fromWeb(response.body).on('error', () => res.destroy()).pipe(res);
        } else {
            res.end();
        }
    } catch (err) {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(String(err));
    }
}).listen(port, '127.0.0.1', () => console.error(`listening on ${port}`));
