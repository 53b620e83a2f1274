/**
 * How the routes' schemas validate requests. Two Ajv instances, because the parts differ: a query
 * string, path or header value is text, so "30" must be read as the integer 30 and a repeated
 * parameter as a list (Fastify's own default coercion); a JSON body has types of its own, so
 * `{"items":"x"}` is a bad body, not a list of one item (which that coercion would make of it).
 */
import { Ajv, type Options } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';

// ajv-formats is CommonJS with its function as the module's default export.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

const BASE: Options = {
  useDefaults: true,
  removeAdditional: true,
  allErrors: false,
  // Nullable fields are type arrays (["string", "null"]), as OpenAPI 3.1 writes them.
  allowUnionTypes: true,
};
const text = addFormats(new Ajv({ ...BASE, coerceTypes: 'array' }));
const json = addFormats(new Ajv({ ...BASE, coerceTypes: false }));

export const validatorCompiler: FastifySchemaCompiler<object> = ({ schema, httpPart }) =>
  (httpPart === 'body' ? json : text).compile(schema) as ReturnType<FastifySchemaCompiler<object>>;
