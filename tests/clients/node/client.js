// node-postgres client for the proxy's end-to-end tests: one line per check, exit code 1 on failure.
// Usage: node client.js HOST PORT USER PASSWORD DATABASE
const { Client } = require("pg");

async function main() {
  const [host, port, user, password, database] = process.argv.slice(2);
  const c = new Client({ host, port: Number(port), user, password, database });
  let failures = 0;
  const check = (name, ok, detail) => {
    console.log(`${ok ? "OK" : "FAIL"} ${name} ${detail ?? ""}`);
    if (!ok) failures++;
  };
  await c.connect();
  const v = await c.query("SELECT version()");
  check("version", v.rows[0].version.startsWith("PostgreSQL"), v.rows[0].version);
  const n = await c.query("SELECT COUNT(*) FROM adult");
  check("count", Number(n.rows[0].count) > 0, n.rows[0].count);
  // Parameterised: node-postgres uses the extended protocol with text parameters of unknown type.
  const p = await c.query("SELECT COUNT(*) FROM adult WHERE age > $1", [30]);
  check("param", Number(p.rows[0].count) >= 0, p.rows[0].count);
  const named = { name: "count-by-age", text: "SELECT COUNT(*) FROM adult WHERE age > $1", values: [40] };
  for (let i = 0; i < 3; i++) {
    const r = await c.query(named);
    check(`named${i}`, Number(r.rows[0].count) >= 0, r.rows[0].count);
  }
  const g = await c.query("SELECT sex, COUNT(*) FROM adult GROUP BY sex ORDER BY sex");
  check("groupby", g.rows.length === 2, JSON.stringify(g.rows));
  try {
    await c.query("SELECT * FROM adult");
    check("refused", false, "no error");
  } catch (e) {
    check("refused", e.code === "42501", e.code);
  }
  const after = await c.query("SELECT COUNT(*) FROM adult");
  check("after_refusal", Number(after.rows[0].count) > 0, after.rows[0].count);
  await c.end();
  console.log(failures === 0 ? "ALL OK" : `${failures} FAILED`);
  process.exit(failures === 0 ? 0 : 1);
}

main().catch((e) => {
  console.log("FAIL exception " + (e.code || "") + " " + e.message);
  process.exit(1);
});
