// Validates Kubernetes manifests offline against the Kubernetes API schema (the JSON schemas of
// the `kubernetes-models` npm package, pinned in package.json), then checks what ptybox needs:
//   node validate.mjs FILE.yaml...
// Every document must name a known apiVersion/kind and pass its schema (types, enums, required
// fields). A pod template must carry bubblewrap's security context (seccomp and AppArmor
// Unconfined, procMount Unmasked with hostUsers false), resource requests and limits, and
// probes. A self-test first feeds broken documents and fails unless each is refused, so a
// validator that checks nothing cannot pass. Limitation: these schemas do not refuse unknown
// field names (a misspelt key is ignored, as `kubectl apply --validate=false` would).
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

async function modelFor(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : [null, apiVersion];
  const path = group ? `kubernetes-models/${group}/${version}/${kind}` : `kubernetes-models/${version}/${kind}`;
  try {
    return (await import(path))[kind];
  } catch {
    return null;
  }
}

async function schemaErrors(doc) {
  if (!doc || typeof doc !== "object") return ["not an object"];
  const Model = await modelFor(String(doc.apiVersion), String(doc.kind));
  if (!Model) return [`unknown apiVersion/kind ${doc.apiVersion}/${doc.kind}`];
  try {
    new Model(doc).validate();
    return [];
  } catch (e) {
    return [String(e.message ?? e).slice(0, 2000)];
  }
}

function ptyboxErrors(doc) {
  const errors = [];
  const pod = doc?.spec?.template?.spec;
  if (!pod) return errors;
  const c = (pod.containers ?? []).find((x) => x.name === "ptybox");
  if (!c) return ["no container named ptybox"];
  const sc = c.securityContext ?? {};
  const unmasked = sc.procMount === "Unmasked";
  if (sc.seccompProfile?.type !== "Unconfined") errors.push("seccompProfile is not Unconfined");
  if (!unmasked && sc.privileged !== true) errors.push("procMount is not Unmasked (nor privileged)");
  if (unmasked && pod.hostUsers !== false) errors.push("procMount: Unmasked needs hostUsers: false");
  for (const k of ["requests", "limits"]) {
    if (!c.resources?.[k]?.memory || !c.resources?.[k]?.cpu) errors.push(`resources.${k} lacks cpu or memory`);
  }
  for (const p of ["readinessProbe", "livenessProbe"]) if (!c[p]) errors.push(`no ${p}`);
  return errors;
}

async function check(name, doc) {
  return [...(await schemaErrors(doc)), ...ptyboxErrors(doc)].map((e) => `${name}: ${e}`);
}

async function selfTest(docs) {
  const set = docs.find((d) => d.kind === "StatefulSet");
  if (!set) throw new Error("self-test: no StatefulSet to mutate");
  const broken = [
    ["replicas is a string", (d) => { d.spec.replicas = "one"; }],
    ["no containers", (d) => { delete d.spec.template.spec.containers; }],
    ["procMount outside its enum", (d) => { d.spec.template.spec.containers[0].securityContext.procMount = 7; }],
    ["seccomp default", (d) => { d.spec.template.spec.containers[0].securityContext.seccompProfile = { type: "RuntimeDefault" }; }],
    ["host users", (d) => { d.spec.template.spec.hostUsers = true; }],
    ["unknown kind", (d) => { d.kind = "StatefulSetz"; }],
  ];
  for (const [what, mutate] of broken) {
    const copy = structuredClone(set);
    mutate(copy);
    if ((await check("self-test", copy)).length === 0) {
      throw new Error(`self-test: a StatefulSet with "${what}" was accepted`);
    }
  }
}

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: node validate.mjs FILE.yaml...");
  process.exit(2);
}
let failures = 0;
let checked = 0;
for (const file of files) {
  const docs = [];
  for (const d of parseAllDocuments(readFileSync(file, "utf8"))) {
    if (d.errors.length) {
      console.error(`${file}: YAML: ${d.errors[0].message}`);
      failures++;
      continue;
    }
    const js = d.toJS();
    if (js !== null) docs.push(js);
  }
  await selfTest(docs);
  for (const doc of docs) {
    const errors = await check(`${file}: ${doc.kind}/${doc.metadata?.name}`, doc);
    errors.forEach((e) => console.error(e));
    failures += errors.length;
    checked++;
  }
}
console.log(`validate: ${checked} documents checked against the Kubernetes schema, ${failures} problem(s)`);
process.exit(failures ? 1 : 0);
