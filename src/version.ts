/** The package's version (test/app/openapi.test.ts checks it against package.json). */
export const VERSION = "0.1.0";
