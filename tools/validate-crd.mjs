// Validate custom resources (JSON, one per argument file) against the Prometheus Operator's
// CRD schemas as @kubernetes-models/prometheus-operator ships them. Prints one line per
// invalid object and exits 1 if any is invalid. Run from the directory npm installed into.
import { readFileSync } from "node:fs";
import { PrometheusRule } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule";
import { ServiceMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor";

const KINDS = { PrometheusRule, ServiceMonitor };
let failed = 0;
for (const path of process.argv.slice(2)) {
  const doc = JSON.parse(readFileSync(path, "utf8"));
  const Model = KINDS[doc.kind];
  if (!Model) { console.log(`${path}: no schema for kind ${doc.kind}`); failed = 1; continue; }
  try {
    new Model(doc).validate();
  } catch (error) {
    console.log(`${doc.kind}/${doc.metadata?.name}: ${error.message}`);
    failed = 1;
  }
}
process.exit(failed);
