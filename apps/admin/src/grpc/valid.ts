import { AppError } from '@relayplane/contract/errors';
import type { Checked } from '../domain/validation.ts';

/** The checked value, or an invalid_request carrying the domain's message. */
export function valid<T>(checked: Checked<T>): T {
  if (!checked.ok) throw new AppError('invalid_request', checked.message);
  return checked.value;
}
