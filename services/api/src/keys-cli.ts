/**
 * API keys from the command line (`make keys ARGS="…"`), on the primary (DATABASE_URL; the API may
 * read from a standby, which replays what this writes). Every command first migrates the key
 * table; `migrate` does only that, before the first API process starts.
 *   migrate
 *   create --customer <id> --plan basic|pro|enterprise [--endpoints "GET /v1/prices/latest;…"]
 *          [--expires <ISO time>] [--per-second N] [--per-minute N] [--per-day N] [--note text]   (prints the key once)
 *   list
 *   disable <prefix> | enable <prefix>
 *   expire <prefix> [<ISO time>|now|never]
 *   restrict <prefix> "<endpoint>;<endpoint>…" | all
 */
import { parseArgs } from 'node:util';
import { parseConfig } from '@skinprices/runtime';
import { createPool, ensureDatabase, ensureSchema, migrate } from '@skinprices/store';
import { apiConfigSchema, MIGRATIONS_DIR } from './config.js';
import { KeyStore } from './keys.js';
import { ENDPOINT_IDS, PLANS, type EndpointId, type Plan } from './plans.js';

const config = parseConfig(apiConfigSchema, process.env);
const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    customer: { type: 'string' },
    plan: { type: 'string' },
    endpoints: { type: 'string' },
    expires: { type: 'string' },
    'per-second': { type: 'string' },
    'per-minute': { type: 'string' },
    'per-day': { type: 'string' },
    note: { type: 'string' },
    json: { type: 'boolean' },
  },
});

function fail(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(2);
}

function endpoints(text: string): EndpointId[] | null {
  if (text === 'all') return null;
  const list = text
    .split(';')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const e of list)
    if (!ENDPOINT_IDS.includes(e as EndpointId))
      fail(`unknown endpoint '${e}'; one of:\n  ${ENDPOINT_IDS.join('\n  ')}`);
  return list as EndpointId[];
}

function time(text: string): Date | null {
  if (text === 'never') return null;
  if (text === 'now') return new Date();
  const t = Date.parse(text);
  if (Number.isNaN(t)) fail(`not a time: '${text}' (ISO 8601, now or never)`);
  return new Date(t);
}

await ensureDatabase(config.DATABASE_URL);
const pool = createPool({
  databaseUrl: config.DATABASE_URL,
  schema: config.KEYS_SCHEMA,
  max: 1,
  applicationName: 'keys-cli',
});
await ensureSchema(pool, config.KEYS_SCHEMA);
await migrate(pool, MIGRATIONS_DIR);
const store = new KeyStore(pool);
const [command, prefix, arg] = positionals;
try {
  switch (command) {
    case 'migrate':
      process.stdout.write(`key table of schema ${config.KEYS_SCHEMA} migrated\n`);
      break;
    case 'create': {
      if (!values.customer) fail('--customer is required');
      if (!PLANS.includes(values.plan as Plan)) fail(`--plan: one of ${PLANS.join(', ')}`);
      const { key, secret } = await store.create({
        customer: values.customer,
        plan: values.plan as Plan,
        allowedEndpoints: values.endpoints ? endpoints(values.endpoints) : null,
        expiresAt: values.expires ? time(values.expires) : null,
        ...(values['per-second'] ? { perSecond: Number(values['per-second']) } : {}),
        ...(values['per-minute'] ? { perMinute: Number(values['per-minute']) } : {}),
        ...(values['per-day'] ? { perDay: Number(values['per-day']) } : {}),
        ...(values.note ? { note: values.note } : {}),
      });
      if (values.json) process.stdout.write(`${JSON.stringify({ ...key, key: secret })}\n`);
      else
        process.stdout.write(`${secret}\n(shown once; stored only as a hash) prefix=${key.prefix} plan=${key.plan}\n`);
      break;
    }
    case 'list':
      for (const k of await store.list())
        process.stdout.write(
          `${k.prefix}  ${k.plan.padEnd(10)} ${k.customer.padEnd(28)} ${k.disabled ? 'DISABLED' : 'active  '} ` +
            `expires=${k.expiresAt?.toISOString() ?? 'never'} endpoints=${k.allowedEndpoints?.join(';') ?? 'all'}\n`,
        );
      break;
    case 'disable':
    case 'enable':
    case 'expire':
    case 'restrict': {
      if (!prefix) fail(`${command} <prefix>`);
      const change =
        command === 'disable'
          ? { disabled: true }
          : command === 'enable'
            ? { disabled: false }
            : command === 'expire'
              ? { expiresAt: time(arg ?? 'now') }
              : { allowedEndpoints: endpoints(arg ?? fail('restrict <prefix> "<endpoint>;…" | all')) };
      const k = await store.update(prefix, change);
      if (!k) fail(`no key with prefix ${prefix}`);
      process.stdout.write(`${JSON.stringify(k)}\n`);
      break;
    }
    default:
      fail(
        'usage: keys migrate|create|list|disable|enable|expire|restrict … (see the comment at the top of keys-cli.ts)',
      );
  }
} finally {
  await pool.end();
}
