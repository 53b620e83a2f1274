/**
 * Runs examples/java-subscriber (kafka-clients and Apache Avro, built by Maven) over topics, as a
 * downstream team in Java reads them: each topic from its beginning to its end, every record
 * decoded with its writer schema fetched by id from the registry, and again with every schema
 * version kept in packages/events/schemas/versions as the reader.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);
const PROJECT = 'examples/java-subscriber';

/** What the subscriber printed for one topic. */
export interface JavaTally {
  topic: string;
  records: number;
  tombstones: number;
  decoded: number;
  failures: number;
  firstFailure: string | null;
  /** Per kept reader version (v1, v2 …): records decoded with it, and those that failed. */
  readers: Record<string, { decoded: number; failures: number }>;
  sample: string | null;
}

let built: Promise<unknown> | undefined;

export async function javaSubscriber(
  env: { brokers: string; registryUrl: string },
  topics: readonly { name: string; stem: string }[],
): Promise<JavaTally[]> {
  // One Maven build per test process: compile, and the runtime jars copied to target/lib.
  built ??= run('mvn', ['-q', '-B', '-f', `${PROJECT}/pom.xml`, 'package', '-DskipTests'], { timeout: 300_000 });
  await built;
  const args = [
    '-cp',
    `${PROJECT}/target/classes:${PROJECT}/target/lib/*`,
    'skinprices.example.Subscriber',
    '--brokers',
    env.brokers,
    '--registry',
    env.registryUrl,
    '--readers',
    'packages/events/schemas/versions',
    ...topics.flatMap((t) => ['--topic', `${t.name}=${t.stem}`]),
  ];
  const { stdout } = await run('java', args, { timeout: 300_000, maxBuffer: 16 * 1024 * 1024 }).catch(
    (err: { stdout?: string; stderr?: string }) => {
      throw new Error(`java subscriber failed: ${err.stderr ?? ''}\n${err.stdout ?? ''}`);
    },
  );
  return stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as JavaTally);
}
