// The tools both interop servers expose, registered on an McpServer of
// either SDK. schema turns a JSON Schema into what registerTool takes;
// req adapts a handler's extra/context argument to {token, signal, notify}.
export function register(server, schema, req) {
    const obj = (properties, required = []) => schema({ type: 'object', properties, required });
    const cancelled = [];
    let started = 0;

    server.registerTool('echo', { description: 'Answers text in one text block.', inputSchema: obj({ text: { type: 'string' } }, ['text']) },
        async ({ text }) => ({ content: [{ type: 'text', text }] }));

    server.registerTool('image', { description: 'Answers a one-pixel PNG image block.', inputSchema: obj({}) },
        async () => ({ content: [{ type: 'image', mimeType: 'image/png', data: 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==' }] }));

    server.registerTool('add', {
        description: 'Answers the sum of a and b, as text and as structured content.',
        inputSchema: obj({ a: { type: 'number' }, b: { type: 'number' } }, ['a', 'b']),
        outputSchema: obj({ sum: { type: 'number' } }, ['sum']),
    }, async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }], structuredContent: { sum: a + b } }));

    server.registerTool('fail', { description: 'Answers a tool error.', inputSchema: obj({}) },
        async () => ({ content: [{ type: 'text', text: 'it failed' }], isError: true }));

    server.registerTool('progress', { description: 'Sends steps progress notifications, one every interval_ms, then answers done.', inputSchema: obj({ steps: { type: 'number' }, interval_ms: { type: 'number' } }, ['steps']) },
        async ({ steps, interval_ms }, ctx) => {
            const r = req(ctx);
            for (let i = 1; i <= steps; i++) {
                await new Promise((ok) => setTimeout(ok, interval_ms ?? 0));
                if (r.token !== undefined) {
                    await r.notify({ method: 'notifications/progress', params: { progressToken: r.token, progress: i, total: steps } });
                }
            }
            return { content: [{ type: 'text', text: 'done' }] };
        });

    server.registerTool('hang', { description: 'Answers only when cancelled; records the cancellation.', inputSchema: obj({}) },
        async (_args, ctx) => {
            const r = req(ctx);
            started++;
            if (!r.signal.aborted) {
                await new Promise((ok) => r.signal.addEventListener('abort', ok, { once: true }));
            }
            cancelled.push('hang');
            return { content: [{ type: 'text', text: 'cancelled' }] };
        });

    server.registerTool('cancelled', { description: 'Answers how many hang calls started and which calls were cancelled.', inputSchema: obj({}) },
        async () => ({ content: [{ type: 'text', text: `started ${started}; cancelled ${cancelled.join(',')}` }] }));

    server.registerTool('relist', { description: 'Adds the tool added, which changes the tool list.', inputSchema: obj({}) },
        async () => {
            server.registerTool('added', { description: 'Added by relist.', inputSchema: obj({}) },
                async () => ({ content: [{ type: 'text', text: 'added' }] }));
            return { content: [{ type: 'text', text: 'ok' }] };
        });
}
