// Appends events through the reference SDK (vendored in ./sdk) on an Upstash REST
// endpoint and prints what each append returned, one JSON line each.
// argv[2]: {"url": ..., "token": ..., "appends": [[entity, event], ...]}
import { createAcmi } from "./sdk/client.js";
import { UpstashAdapter } from "./sdk/adapters/upstash.js";

const { url, token, appends } = JSON.parse(process.argv[2]);
const acmi = createAcmi(new UpstashAdapter({ url, token }));
for (const [entity, event] of appends) {
  console.log(JSON.stringify(await acmi.timeline.append(entity, event)));
}
