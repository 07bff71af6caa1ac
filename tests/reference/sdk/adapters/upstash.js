/**
 * REST-based Upstash adapter. Edge-compatible — works in Cloudflare Workers,
 * Vercel Edge, Deno Deploy, and Node 18+. No long-lived connection.
 *
 * Storage shape:
 *   - Profile  → STRING + JSON   at `<prefix>:<entityId>:profile`
 *   - Signals  → STRING + JSON   at `<prefix>:<entityId>:signals`     (Comms v1.1 unified)
 *   - Timeline → ZSET (score=ts) at `<prefix>:<entityId>:timeline`
 *
 * The `<entityId>` already contains a `:` separator (`<category>:<id>`), so
 * keys naturally produce `acmi:user:mikey:profile`, etc.
 */
export class UpstashAdapter {
    name = "upstash";
    url;
    token;
    prefix;
    fetchImpl;
    signal;
    constructor(config) {
        if (!config.url)
            throw new Error("UpstashAdapter: `url` is required");
        if (!config.token)
            throw new Error("UpstashAdapter: `token` is required");
        this.url = config.url.replace(/\/$/, "");
        this.token = config.token;
        this.prefix = config.prefix ?? "acmi";
        this.fetchImpl = config.fetch ?? fetch;
        this.signal = config.signal;
    }
    // ─── Internal: REST call ────────────────────────────────────────────────
    async fetchWithRetry(path, body, retries = 5) {
        let lastError;
        for (let i = 0; i < retries; i++) {
            try {
                const res = await this.fetchImpl(`${this.url}${path}`, {
                    method: "POST",
                    headers: {
                        Authorization: `Bearer ${this.token}`,
                        "Content-Type": "application/json",
                    },
                    body,
                    signal: this.signal,
                });
                if (res.status === 429) {
                    const delay = Math.pow(2, i) * 100 + Math.random() * 50;
                    await new Promise((resolve) => setTimeout(resolve, delay));
                    continue;
                }
                if (!res.ok) {
                    throw new Error(`Upstash REST error ${res.status}: ${await res.text()}`);
                }
                const data = await res.json();
                if (data.error)
                    throw new Error(`Upstash error: ${data.error}`);
                return data.result !== undefined ? data.result : data;
            }
            catch (err) {
                lastError = err;
                if (i === retries - 1)
                    throw err;
                const delay = Math.pow(2, i) * 100 + Math.random() * 50;
                await new Promise((resolve) => setTimeout(resolve, delay));
            }
        }
        throw lastError || new Error("fetchWithRetry failed");
    }
    async cmd(...args) {
        return this.fetchWithRetry("/", JSON.stringify(args.map(String)));
    }
    k(entityId, slot) {
        return `${this.prefix}:${entityId}:${slot}`;
    }
    // ─── Profile ────────────────────────────────────────────────────────────
    async profileGet(entityId) {
        const raw = await this.cmd("GET", this.k(entityId, "profile"));
        if (raw === null)
            return null;
        try {
            return JSON.parse(raw);
        }
        catch {
            throw new Error(`profile at ${this.k(entityId, "profile")} is not valid JSON`);
        }
    }
    async profileSet(entityId, doc) {
        await this.cmd("SET", this.k(entityId, "profile"), JSON.stringify(doc));
    }
    async profileMerge(entityId, partial) {
        const current = (await this.profileGet(entityId)) ?? {};
        const merged = { ...current, ...partial };
        await this.profileSet(entityId, merged);
        return merged;
    }
    async profileDelete(entityId) {
        await this.cmd("DEL", this.k(entityId, "profile"));
    }
    // ─── Signals ────────────────────────────────────────────────────────────
    async signalsLoad(entityId) {
        const raw = await this.cmd("GET", this.k(entityId, "signals"));
        if (raw === null)
            return {};
        try {
            return JSON.parse(raw);
        }
        catch {
            throw new Error(`signals at ${this.k(entityId, "signals")} is not valid JSON`);
        }
    }
    async signalsStore(entityId, doc) {
        await this.cmd("SET", this.k(entityId, "signals"), JSON.stringify(doc));
    }
    async signalsGet(entityId, key) {
        const all = await this.signalsLoad(entityId);
        return all[key];
    }
    async signalsSet(entityId, key, value) {
        const all = await this.signalsLoad(entityId);
        all[key] = value;
        await this.signalsStore(entityId, all);
    }
    async signalsAll(entityId) {
        return this.signalsLoad(entityId);
    }
    async signalsDelete(entityId, key) {
        const all = await this.signalsLoad(entityId);
        delete all[key];
        await this.signalsStore(entityId, all);
    }
    // ─── Timeline ───────────────────────────────────────────────────────────
    async timelineAppend(entityId, event) {
        await this.cmd("ZADD", this.k(entityId, "timeline"), "NX", event.ts, JSON.stringify(event));
    }
    async timelineRead(entityId, opts) {
        const key = this.k(entityId, "timeline");
        const min = opts?.sinceMs !== undefined ? String(opts.sinceMs) : "-inf";
        const max = opts?.untilMs !== undefined ? String(opts.untilMs) : "+inf";
        const raw = opts?.reverse
            ? await this.cmd("ZREVRANGEBYSCORE", key, max, min, ...withLimit(opts?.limit))
            : await this.cmd("ZRANGEBYSCORE", key, min, max, ...withLimit(opts?.limit));
        return (raw ?? []).map((s) => JSON.parse(s));
    }
    async timelineSize(entityId) {
        const n = await this.cmd("ZCARD", this.k(entityId, "timeline"));
        return typeof n === "number" ? n : Number(n) || 0;
    }
    async batch(ops) {
        const commands = [];
        const signalsOps = [];
        for (const op of ops) {
            switch (op.type) {
                case "profileSet":
                    commands.push(["SET", this.k(op.entityId, "profile"), JSON.stringify(op.doc)]);
                    break;
                case "profileDelete":
                    commands.push(["DEL", this.k(op.entityId, "profile")]);
                    break;
                case "signalsSet":
                case "signalsDelete":
                    // Signals are read-modify-write, can't easily batch without LUA.
                    // Collect for sequential execution.
                    signalsOps.push(op);
                    break;
                case "timelineAppend":
                    commands.push([
                        "ZADD",
                        this.k(op.entityId, "timeline"),
                        "NX",
                        op.event.ts,
                        JSON.stringify(op.event),
                    ]);
                    break;
            }
        }
        if (commands.length > 0) {
            const data = await this.fetchWithRetry("/pipeline", JSON.stringify(commands.map((c) => c.map(String))));
            if (Array.isArray(data)) {
                for (const r of data) {
                    if (r.error)
                        throw new Error(`Upstash pipeline error: ${r.error}`);
                }
            }
        }
        // Handle signals sequentially
        for (const op of signalsOps) {
            if (op.type === "signalsSet") {
                await this.signalsSet(op.entityId, op.key, op.value);
            }
            else if (op.type === "signalsDelete") {
                await this.signalsDelete(op.entityId, op.key);
            }
        }
    }
}
function withLimit(limit) {
    if (limit === undefined)
        return [];
    return ["LIMIT", 0, limit];
}
