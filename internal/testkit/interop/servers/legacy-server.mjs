// A legacy-era server built on the TypeScript SDK 1.x
// (@modelcontextprotocol/sdk, pinned in package.json), for capbridge's
// interop tests: the same tools as modern-server.mjs, over the
// initialize handshake. server/discover is not one of its methods.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';
import { register } from './tools.mjs';

// zodFrom turns the flat JSON Schemas tools.mjs writes into the zod
// objects SDK 1.x registers.
function zodFrom(js) {
    const shape = {};
    for (const [k, p] of Object.entries(js.properties ?? {})) {
        const t = p.type === 'number' ? z.number() : z.string();
        shape[k] = (js.required ?? []).includes(k) ? t : t.optional();
    }
    return z.object(shape);
}

const server = new McpServer({ name: 'capbridge-interop-legacy', version: '1.32.2' }, { capabilities: { tools: { listChanged: true } } });
register(server, zodFrom, (extra) => ({
    token: extra._meta?.progressToken,
    signal: extra.signal,
    notify: (n) => extra.sendNotification(n),
}));
await server.connect(new StdioServerTransport());
