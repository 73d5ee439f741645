// A 2026-07-28 server built on the TypeScript SDK v2 (@modelcontextprotocol/server,
// pinned in package.json), for capbridge's interop tests. Run with
// `node modern-server.mjs serve` (both eras; the first request pins one) or
// `node modern-server.mjs reject` (modern only: initialize gets -32022).
// Its tools cover each kind of answer: text, another content kind,
// structured content, a tool error, progress, cancellation, and a change of
// the tool list.
import { McpServer, fromJsonSchema } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { register } from './tools.mjs';

const legacy = process.argv[2] === 'reject' ? 'reject' : 'serve';

serveStdio(() => {
    const server = new McpServer({ name: 'capbridge-interop-modern', version: '2.4.0' }, { capabilities: { tools: { listChanged: true } } });
    register(server, fromJsonSchema, (ctx) => ({
        token: ctx.mcpReq._meta?.progressToken,
        signal: ctx.mcpReq.signal,
        notify: (n) => ctx.mcpReq.notify(n),
    }));
    return server;
}, { legacy });
