/**
 * ACMI — Agentic Context Memory Interface
 *
 * The protocol for agent memory. Three keys per entity:
 *   - Profile: who (identity, preferences, anything stable)
 *   - Signals: now (current state — what's open, what's pending)
 *   - Timeline: then (append-only event log)
 *
 * Entity IDs follow the pattern `<category>:<id>` (e.g. `user:mikey`,
 * `agent:claude-engineer`, `project:tony-top-of-new-york`).
 *
 * The adapter is responsible for prefixing keys with `acmi:` and adding
 * the `:profile` / `:signals` / `:timeline` slot suffix.
 */
/** Validation error thrown when an event is missing Comms v1.1 mandatory fields. */
export class AcmiValidationError extends Error {
    constructor(message) {
        super(message);
        this.name = "AcmiValidationError";
    }
}
