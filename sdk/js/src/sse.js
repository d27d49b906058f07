// SPDX-License-Identifier: LGPL-2.1-or-later
// A Server-Sent Events parser over a fetch() body (a ReadableStream of bytes): yields {id, event, data}.

/* Lines may end in \n, \r\n or \r (the SSE grammar); a blank line dispatches the event. Comment lines
 * (": heartbeat") are skipped. id is kept only when the block carried one. */
export async function* parseSse(body) {
        const reader = body.getReader();
        const decoder = new TextDecoder("utf-8");
        let buf = "";
        let ev = { id: null, event: null, data: [] };
        try {
                for (;;) {
                        const { value, done } = await reader.read();
                        if (done)
                                break;
                        buf += decoder.decode(value, { stream: true });
                        let m;
                        while ((m = /\r\n|\n|\r/.exec(buf)) !== null) {
                                /* A lone \r at the very end may be the first half of \r\n: wait for more. */
                                if (m[0] === "\r" && m.index === buf.length - 1)
                                        break;
                                const line = buf.slice(0, m.index);
                                buf = buf.slice(m.index + m[0].length);
                                if (line === "") {
                                        if (ev.data.length > 0 || ev.event !== null)
                                                yield { id: ev.id, event: ev.event || "message", data: ev.data.join("\n") };
                                        ev = { id: null, event: null, data: [] };
                                        continue;
                                }
                                if (line.startsWith(":"))
                                        continue;
                                const colon = line.indexOf(":");
                                const field = colon < 0 ? line : line.slice(0, colon);
                                let value = colon < 0 ? "" : line.slice(colon + 1);
                                if (value.startsWith(" "))
                                        value = value.slice(1);
                                if (field === "data")
                                        ev.data.push(value);
                                else if (field === "event")
                                        ev.event = value;
                                else if (field === "id")
                                        ev.id = value;
                        }
                }
        } finally {
                /* Ending the iteration early (break, return, throw) must close the connection. */
                reader.cancel().catch(() => {});
        }
}
