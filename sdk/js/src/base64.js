// SPDX-License-Identifier: LGPL-2.1-or-later
// Base64 and UTF-8 helpers that work in Node (Buffer) and in browsers (btoa/atob).

const enc = new TextEncoder();
const dec = new TextDecoder("utf-8");

export function toBytes(data) {
        if (typeof data === "string")
                return enc.encode(data);
        if (data instanceof Uint8Array)
                return data;
        if (data instanceof ArrayBuffer)
                return new Uint8Array(data);
        if (ArrayBuffer.isView(data))
                return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
        throw new TypeError("expected a string or a Uint8Array");
}

export function bytesToText(bytes) {
        return dec.decode(bytes);
}

export function b64encode(bytes) {
        if (typeof Buffer !== "undefined")
                return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
        let s = "";
        for (let i = 0; i < bytes.length; i += 0x8000)
                s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
        return btoa(s);
}

export function b64decode(text) {
        if (typeof Buffer !== "undefined") {
                const b = Buffer.from(text, "base64");
                return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
        }
        const s = atob(text);
        const out = new Uint8Array(s.length);
        for (let i = 0; i < s.length; i++)
                out[i] = s.charCodeAt(i);
        return out;
}
