/** The page between a verb's button and the change: what it will do, and a form that carries the token. */
import { html } from "hono/html";

/**
 * A confirmation page. `token` is the start-up token the form repeats;
 * `null` when the verb does not apply to the record as it is now (then
 * the page says so instead of offering a form).
 */
export function confirmPage(options: {
  title: string;
  question: string;
  action: string;
  fields: Record<string, string>;
  cancelHref: string;
  token: string | null;
  /** What the verb acts on, for the sentence shown when it does not apply (Default: `run`). */
  subject?: string;
}) {
  const { title, question, action, fields, cancelHref, token, subject = "run" } = options;
  return html`<h1>${title}</h1>
    <article>
      <p>${question}</p>
      ${
        token === null
          ? html`<p>This does not apply to the ${subject} as it is now (another change came first): nothing to confirm.</p>`
          : html`<form method="post" action="${action}">
              ${Object.entries(fields).map(([name, value]) => html`<input type="hidden" name="${name}" value="${value}" />`)}
              <input type="hidden" name="token" value="${token}" />
              <button type="submit">Confirm: ${title}</button>
            </form>`
      }
      <p><a href="${cancelHref}">Cancel</a></p>
    </article>`;
}
