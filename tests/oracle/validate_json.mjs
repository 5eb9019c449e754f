// The JSON Schema oracle for the grammar tests: ajv (an independent
// validator). Reads JSON lines {schema, output, draft: "7" | "2020"} from
// FILE and prints one line per input: {"ok": bool, "error": string}. ok
// means output parses as JSON and validates under schema.
//   node tests/oracle/validate_json.mjs FILE
// Formats are checked from their RFC definitions (RFC 3339 dates and
// times, RFC 4122 UUIDs, dotted-quad IPv4, a dot-atom e-mail address).
import fs from "node:fs";
import Ajv from "ajv";
import Ajv2020 from "ajv/dist/2020.js";

const [file] = process.argv.slice(2);
if (!file) {
  console.error("usage: validate_json.mjs FILE");
  process.exit(2);
}

const daysIn = (y, m) => [31, (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0 ? 29 : 28, 31, 30, 31, 30,
                          31, 31, 30, 31, 30, 31][m - 1];
const date = (s) => {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(s);
  if (!m) return false;
  const [y, mo, d] = [+m[1], +m[2], +m[3]];
  return mo >= 1 && mo <= 12 && d >= 1 && d <= daysIn(y, mo);
};
const time = (s) => {
  const m = /^(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|z|[+-](\d{2}):(\d{2}))$/.exec(s);
  if (!m) return false;
  const ok = +m[1] <= 23 && +m[2] <= 59 && +m[3] <= 60;
  return ok && (m[6] === undefined || (+m[6] <= 23 && +m[7] <= 59));
};
const formats = {
  date,
  time,
  "date-time": (s) => {
    const i = s.search(/[Tt]/);
    return i > 0 && date(s.slice(0, i)) && time(s.slice(i + 1));
  },
  uuid: (s) => /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/.test(s),
  ipv4: (s) => {
    const p = s.split(".");
    return p.length === 4 && p.every((x) => /^(0|[1-9]\d{0,2})$/.test(x) && +x <= 255);
  },
  email: (s) => /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)+$/.test(s),
};
const make = (Cls) => {
  const ajv = new Cls({ strict: false, allErrors: false, validateSchema: false });
  for (const [name, fn] of Object.entries(formats)) ajv.addFormat(name, fn);
  return ajv;
};

const out = [];
for (const line of fs.readFileSync(file, "utf8").split("\n")) {
  if (line.length === 0) continue;
  const { schema, output, draft } = JSON.parse(line);
  let value;
  try {
    value = JSON.parse(output);
  } catch (e) {
    out.push(JSON.stringify({ ok: false, error: `not JSON: ${e.message}` }));
    continue;
  }
  // A fresh instance per schema: suite schemas reuse $id values.
  const ajv = make(draft === "7" ? Ajv : Ajv2020);
  const validate = ajv.compile(schema);
  const ok = validate(value);
  out.push(JSON.stringify({ ok, error: ok ? "" : ajv.errorsText(validate.errors) }));
}
process.stdout.write(out.join("\n") + "\n");
