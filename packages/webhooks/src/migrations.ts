/**
 * Where the webhooks schema's migrations live. The notifier applies them at start (it owns the
 * delivery tables); tests apply the same files, so there is one definition of the schema.
 */
import { fileURLToPath } from 'node:url';

export const WEBHOOKS_MIGRATIONS_DIR: string = fileURLToPath(new URL('../migrations/', import.meta.url));
